#!/usr/bin/env bash
# Builds, once, every library the wheel's programs link, as static libraries for glibc 2.28: what
# lets the wheel be manylinux_2_28 (RHEL 8 and newer) where a build with Debian 12's own libraries
# needs glibc 2.34 (every vendored library has symbols of 2.34; two need GCC 12's libstdc++).
#
#   scripts/wheel/build-glibc-deps.sh        prints the prefix that holds them (include/, lib/)
#
# How: zig's C and C++ compilers (ziglang from PyPI, in .venv-wheel) with
# `-target x86_64-linux-gnu.2.28` compile against glibc 2.28's headers and link against its
# symbol versions, whatever glibc this machine has, and link LLVM's libc++ statically (so no C++
# runtime is needed where the wheel runs, GCC 8's included). The sources are Debian 12's own
# source packages, the same versions (and Debian's patches) as the libraries the rest of the
# project uses: apt-get source, through an apt configuration of this script's own (the machine's
# sources list is neither read nor changed). Static libraries, so the programs need nothing but
# glibc: no library is vendored into the wheel.
#
# Cached: the prefix's name is a hash of the recipe's number (below), the zig version and the
# source versions, under $MXRUN_GLIBC_DEPS_CACHE (default ~/.cache/mxrun/glibc-deps); a second
# run prints it and builds nothing. Cold, the build took 939 s (16 min) on 2 cores here
# (docs/benchmarks/packaging.md: the wheel). The versions are pinned; the mirror keeps only the current
# ones, so when Debian replaces one (a point or security release) a cold build stops at
# apt-get source, saying so: move the pin to the new version.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
glibc=2.28  # the target of scripts/wheel/zig-toolchain.sh
# Debian 12's source packages: the versions of the -dev packages scripts/install-deps.sh installs.
sources=(
  zlib=1:1.2.13.dfsg-1
  c-ares=1.18.1-3
  re2=20220601+dfsg-1
  openssl=3.0.20-1~deb12u2
  abseil=20220623.1-1+deb12u2
  protobuf=3.21.12-3+deb12u1
  grpc=1.51.1-3
  hwloc=2.9.0-1
  fmtlib=9.1.0+ds1-2
  spdlog=1:1.10.0+ds-0.4
)
jobs="${MXRUN_BUILD_JOBS:-$(nproc)}"

wheel_venv=$("$root/scripts/python-env.sh" wheel)
zig_version=$("$wheel_venv/bin/python3" -m ziglang version)
# Bump when a library is built differently (an option, a flag): the prefix's name changes with it.
recipe=2
key=$(echo "recipe $recipe glibc $glibc zig $zig_version ${sources[*]}" | sha256sum | cut -c1-16)
cache="${MXRUN_GLIBC_DEPS_CACHE:-$HOME/.cache/mxrun/glibc-deps}"
prefix="$cache/glibc$glibc-$key"
if [[ -f "$prefix/.complete" ]]; then
  echo "$prefix"
  exit 0
fi
mkdir -p "$cache"
exec {lock}>>"$cache/.lock"
flock "$lock"
if [[ -f "$prefix/.complete" ]]; then echo "$prefix"; exit 0; fi

# Each library's build leaves a stamp in $work: an interrupted build goes on where it stopped.
work="$cache/work-$key"
mkdir -p "$work" "$prefix"
log="$work/build.log"
echo "build-glibc-deps: building ${#sources[@]} libraries for glibc $glibc with zig $zig_version into $prefix (log: $log)" >&2
started=$SECONDS

# The toolchain, in the work folder: the prefix outlives this checkout's .venv-wheel.
tools="$work/toolchain"
"$root/scripts/wheel/zig-toolchain.sh" "$tools" "$prefix"

# The sources, through an apt configuration of this script's own.
apt_dir="$work/apt"
mkdir -p "$apt_dir/lists/partial" "$work/src"
echo "deb-src http://deb.debian.org/debian bookworm main" >"$apt_dir/sources.list"
echo "deb-src http://deb.debian.org/debian-security bookworm-security main" >>"$apt_dir/sources.list"
apt_options=(-o "Dir::Etc::SourceList=$apt_dir/sources.list" -o Dir::Etc::SourceParts=/dev/null
             -o "Dir::State::Lists=$apt_dir/lists" -o APT::Sandbox::User=root)
[[ -f "$work/done-sources" ]] || {
apt-get "${apt_options[@]}" update >>"$log" 2>&1 ||
  { tail -5 "$log" >&2; echo "build-glibc-deps: apt-get update of Debian's source index failed" >&2; exit 1; }
(cd "$work/src" && apt-get "${apt_options[@]}" source "${sources[@]}") >>"$log" 2>&1 ||
  { tail -5 "$log" >&2
    echo "build-glibc-deps: apt-get source ${sources[*]} failed: if a version is no longer on" \
         "Debian's mirror (above), pin the one 'apt-cache policy' names for its -dev package" >&2
    exit 1; }
touch "$work/done-sources"; }
src() { find "$work/src" -mindepth 1 -maxdepth 1 -type d -name "$1-*" | head -1; }

cmake="${CMAKE:-$(command -v /usr/bin/cmake || command -v cmake)}"
ninja=$(command -v /usr/bin/ninja || command -v ninja)
# Through ccache when the machine has it, so a lost prefix is rebuilt from the cache: paths
# relative to the work folder, the compiler known by zig's version (zig-toolchain.sh).
ccache=$(command -v ccache || echo "")
export CCACHE_BASEDIR="$work" CCACHE_NOHASHDIR=1 CCACHE_COMPILERCHECK="string:$(cat "$tools/compiler-id")"
export CFLAGS="-O2 -fPIC" CXXFLAGS="-O2 -fPIC"
done_before() {  # NAME: true (and says so) when an earlier run built it
  if [[ -f "$work/done-$1" ]]; then return 0; fi
  echo "build-glibc-deps: $1 ($((SECONDS - started)) s)" >&2
  return 1
}
cmake_build() {  # NAME SOURCE_DIR CMAKE_ARGS...
  local name=$1 dir=$2
  shift 2
  done_before "$name" && return 0
  "$cmake" -S "$dir" -B "$work/build-$name" -G Ninja -DCMAKE_MAKE_PROGRAM="$ninja" -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_TOOLCHAIN_FILE="$tools/toolchain.cmake" -DCMAKE_INSTALL_PREFIX="$prefix" \
    -DCMAKE_INSTALL_LIBDIR=lib -DCMAKE_PREFIX_PATH="$prefix" -DBUILD_SHARED_LIBS=OFF \
    -DCMAKE_CXX_STANDARD=17 -DCMAKE_POSITION_INDEPENDENT_CODE=ON -DBUILD_TESTING=OFF \
    -DCMAKE_C_COMPILER_LAUNCHER="$ccache" -DCMAKE_CXX_COMPILER_LAUNCHER="$ccache" "$@" >>"$log" 2>&1 &&
  "$cmake" --build "$work/build-$name" -j "$jobs" >>"$log" 2>&1 &&
  "$cmake" --install "$work/build-$name" >>"$log" 2>&1 ||
    { tail -30 "$log" >&2; echo "build-glibc-deps: $name failed (log: $log)" >&2; exit 1; }
  touch "$work/done-$name"
}

# zlib's own configure: Debian's source leaves out the win32/ folder that its CMakeLists names.
done_before zlib || { (cd "$(src zlib)" &&
  CC="$tools/cc" AR="$tools/ar" RANLIB="$tools/ranlib" ./configure --static --prefix="$prefix" &&
  make -j "$jobs" libz.a && make install) >>"$log" 2>&1 ||
  { tail -30 "$log" >&2; echo "build-glibc-deps: zlib failed (log: $log)" >&2; exit 1; }
  touch "$work/done-zlib"; }
cmake_build c-ares "$(src c-ares)" -DCARES_STATIC=ON -DCARES_SHARED=OFF -DCARES_BUILD_TOOLS=OFF
# Debian's re2 source leaves out the generated Unicode tables: made again from unicode-data, as
# Debian's own build does.
[[ -f "$work/done-re2" ]] || (cd "$(src re2)" && make REBUILD_TABLES=1 re2/perl_groups.cc \
  re2/unicode_casefold.cc re2/unicode_groups.cc) >>"$log" 2>&1 ||
  { tail -30 "$log" >&2; echo "build-glibc-deps: re2's tables failed (needs unicode-data; log: $log)" >&2; exit 1; }
cmake_build re2 "$(src re2)" -DRE2_BUILD_TESTING=OFF

done_before openssl || { (cd "$(src openssl)" &&
  ./Configure linux-x86_64 no-shared no-tests no-engine no-dso --prefix="$prefix" \
    --libdir=lib --openssldir=/etc/ssl CC="$tools/cc" AR="$tools/ar" RANLIB="$tools/ranlib" &&
  make -j "$jobs" build_libs && make install_dev) >>"$log" 2>&1 ||
  { tail -30 "$log" >&2; echo "build-glibc-deps: openssl failed (log: $log)" >&2; exit 1; }
  touch "$work/done-openssl"; }

cmake_build abseil "$(src abseil)" -DABSL_PROPAGATE_CXX_STD=ON -DABSL_ENABLE_INSTALL=ON
# Debian's patch links libatomic into every Abseil user through --push-state/--pop-state, which
# zig's linker refuses; x86-64 needs no libatomic (the patch is for armel and riscv64).
sed -i -E -e 's/-Wl,--push-state,--as-needed;//g' -e 's/;-Wl,--pop-state//g' \
  -e 's/\\\$<LINK_ONLY:-latomic>;?//g' -e 's/-latomic;?//g' "$prefix/lib/cmake/absl/abslTargets.cmake"
cmake_build protobuf "$(src protobuf)" -Dprotobuf_BUILD_TESTS=OFF -Dprotobuf_BUILD_PROTOC_BINARIES=ON \
  -Dprotobuf_WITH_ZLIB=OFF -Dprotobuf_BUILD_SHARED_LIBS=OFF
# clang 19 and newer refuse `template f` without arguments (gRPC 1.51's promise headers have one):
# an error there only since clang 19, a warning before, and harmless code.
cmake_build grpc "$(src grpc)" -DCMAKE_CXX_FLAGS="$CXXFLAGS -Wno-missing-template-arg-list-after-template-kw" \
  -DgRPC_INSTALL=ON -DgRPC_BUILD_TESTS=OFF -DgRPC_BUILD_CODEGEN=OFF \
  -DgRPC_ABSL_PROVIDER=package -DgRPC_CARES_PROVIDER=package -DgRPC_PROTOBUF_PROVIDER=package \
  -DgRPC_RE2_PROVIDER=package -DgRPC_SSL_PROVIDER=package -DgRPC_ZLIB_PROVIDER=package \
  -DgRPC_BUILD_CSHARP_EXT=OFF -DgRPC_BUILD_GRPC_CPP_PLUGIN=OFF -DgRPC_BUILD_GRPC_CSHARP_PLUGIN=OFF \
  -DgRPC_BUILD_GRPC_NODE_PLUGIN=OFF -DgRPC_BUILD_GRPC_OBJECTIVE_C_PLUGIN=OFF \
  -DgRPC_BUILD_GRPC_PHP_PLUGIN=OFF -DgRPC_BUILD_GRPC_PYTHON_PLUGIN=OFF -DgRPC_BUILD_GRPC_RUBY_PLUGIN=OFF \
  -DOPENSSL_USE_STATIC_LIBS=ON -DOPENSSL_ROOT_DIR="$prefix"

done_before hwloc || { (cd "$(src hwloc)" &&
  ./configure --prefix="$prefix" --libdir="$prefix/lib" --enable-static --disable-shared \
    --disable-libudev --disable-libxml2 --disable-cairo --disable-pci --disable-opencl \
    --disable-cuda --disable-nvml --disable-rsmi --disable-levelzero --disable-gl --disable-doxygen \
    --disable-plugins CC="$tools/cc" AR="$tools/ar" RANLIB="$tools/ranlib" &&
  make -j "$jobs" -C hwloc && make -C hwloc install && make -C include install &&
  install -D -m 0644 hwloc.pc "$prefix/lib/pkgconfig/hwloc.pc") >>"$log" 2>&1 ||
  { tail -30 "$log" >&2; echo "build-glibc-deps: hwloc failed (log: $log)" >&2; exit 1; }
  touch "$work/done-hwloc"; }

cmake_build fmt "$(src fmtlib)" -DFMT_TEST=OFF -DFMT_DOC=OFF
cmake_build spdlog "$(src spdlog)" -DSPDLOG_FMT_EXTERNAL=ON -DSPDLOG_BUILD_EXAMPLE=OFF \
  -DSPDLOG_BUILD_TESTS=OFF

# The header-only libraries come from the machine's own packages (no glibc in them).
for header in CLI nlohmann toml++; do
  cp -r "/usr/include/$header" "$prefix/include/"
done
for config in CLI11 nlohmann_json; do
  for dir in /usr/share/cmake/$config /usr/lib/cmake/$config /usr/share/$config/cmake /usr/lib/x86_64-linux-gnu/cmake/$config; do
    [[ -d "$dir" ]] && { mkdir -p "$prefix/lib/cmake/$config"; cp -r "$dir/." "$prefix/lib/cmake/$config/"; }
  done
done

# Relocatable: the .pc files name their prefix through pkg-config's ${pcfiledir}, not by the path
# it has now (libtool's .la files, which only name it, go).
sed -i "s|$prefix|\${pcfiledir}/../..|g" "$prefix"/lib/pkgconfig/*.pc
rm -f "$prefix"/lib/*.la
cp "$log" "$prefix/build.log"
rm -rf -- "$work"
touch "$prefix/.complete"
echo "build-glibc-deps: done in $((SECONDS - started)) s: $prefix ($(du -sh "$prefix" | cut -f1))" >&2
echo "$prefix"
