#!/usr/bin/env bash
# The clang ASan + UBSan build, configured when it is not yet (it builds nothing itself):
#   scripts/asan-build.sh [DIR]      (default: build-asan)
# One build serves both of its users: scripts/sanitize.sh address runs the unit and integration
# tests in it and scripts/fuzz.sh builds and runs the libFuzzer targets in it. Every library is
# compiled once, with libFuzzer's coverage instrumentation (-fsanitize=fuzzer-no-link, MXRUN_FUZZ)
# beside ASan and UBSan; the test programs, which do not link libFuzzer, get the sanitizer
# runtime's empty coverage hooks. Two builds compiled the same libraries twice: on a cold compiler
# cache the fuzz targets' own build was 280 s of a fresh machine's 67 minutes.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dir="${1:-$repo/build-asan}"
command -v clang++ >/dev/null ||
  { echo "asan-build.sh: clang++ is not installed (scripts/install-deps.sh)" >&2; exit 2; }
# clang: GCC took 3x as long to compile the same files with UBSan (the Catch main 114 s against
# clang's 36 s).
flags="-fsanitize=address,undefined -fno-omit-frame-pointer"
cache="$dir/CMakeCache.txt"
# A build made by another compiler, or before the fuzz targets were part of it, is made anew.
if [ -f "$cache" ] && { ! grep -qx "CMAKE_CXX_COMPILER:[A-Z]*=$(command -v clang++)" "$cache" ||
                        ! grep -qx "MXRUN_FUZZ:BOOL=ON" "$cache"; }; then
  rm -rf "$dir"
fi
if [ ! -f "$dir/build.ninja" ]; then
  CC=clang CXX=clang++ "${CMAKE:-/usr/bin/cmake}" -S "$repo" -B "$dir" -G Ninja \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMXRUN_BUILD_TRAINER=OFF -DMXRUN_FUZZ=ON \
    -DCMAKE_C_FLAGS="$flags" -DCMAKE_CXX_FLAGS="$flags" \
    -DCMAKE_EXE_LINKER_FLAGS="$flags" -DCMAKE_SHARED_LINKER_FLAGS="$flags" >/dev/null
fi
