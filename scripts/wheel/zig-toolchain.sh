#!/usr/bin/env bash
# Writes a C/C++ toolchain for glibc 2.28 into DIR: cc, c++, ar and ranlib (zig's, from the
# ziglang package of .venv-wheel, with `-target x86_64-linux-gnu.2.28`) and toolchain.cmake, which
# points CMake at them and at PREFIX alone for libraries, headers and packages (never the
# machine's, built for glibc 2.36 against libstdc++). Programs are still found on the machine
# (protoc, gRPC's plugin: generators that run here).
#
#   scripts/wheel/zig-toolchain.sh DIR PREFIX
#
# Used by scripts/wheel/build-glibc-deps.sh (PREFIX: where it installs) and scripts/build-wheel.sh
# (PREFIX: those libraries). Written per checkout, since the wrappers name its .venv-wheel.
set -euo pipefail
[[ $# == 2 ]] || { echo "usage: scripts/wheel/zig-toolchain.sh DIR PREFIX" >&2; exit 2; }
dir=$1 prefix=$2
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
target=x86_64-linux-gnu.2.28
wheel_venv=$("$root/scripts/python-env.sh" wheel)
zig="$wheel_venv/bin/python3 -m ziglang"
mkdir -p "$dir"
for tool in cc c++; do
  printf '#!/bin/sh\nexec %s %s -target %s "$@"\n' "$zig" "$tool" "$target" >"$dir/$tool"
done
for tool in ar ranlib; do
  printf '#!/bin/sh\nexec %s %s "$@"\n' "$zig" "$tool" >"$dir/$tool"
done
chmod +x "$dir"/cc "$dir"/c++ "$dir"/ar "$dir"/ranlib
cat >"$dir/toolchain.cmake" <<EOF
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR x86_64)
set(CMAKE_C_COMPILER "$dir/cc")
set(CMAKE_CXX_COMPILER "$dir/c++")
set(CMAKE_AR "$dir/ar")
set(CMAKE_RANLIB "$dir/ranlib")
set(CMAKE_FIND_ROOT_PATH "$prefix")
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
EOF
# ccache (CMakeLists.txt uses it when found) would hash the wrappers by their times, new in every
# checkout: the compiler's identity is zig's version and the target instead.
echo "zig $("$wheel_venv/bin/python3" -m ziglang version) $target" >"$dir/compiler-id"
