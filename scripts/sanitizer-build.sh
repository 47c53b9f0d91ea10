#!/usr/bin/env bash
# A sanitizer build of the project without the trainer, configured when it is not yet (it builds
# nothing itself):
#   scripts/sanitizer-build.sh address [DIR]   ASan + UBSan, clang (default DIR: build-asan)
#   scripts/sanitizer-build.sh thread [DIR]    TSan, GCC (default DIR: build-tsan)
# The ASan + UBSan build serves two users: scripts/sanitize.sh address runs the unit and
# integration tests in it and scripts/fuzz.sh builds and runs the libFuzzer targets in it. Every
# library is compiled once, with libFuzzer's coverage instrumentation (-fsanitize=fuzzer-no-link,
# MXRUN_FUZZ) beside ASan and UBSan; the test programs, which do not link libFuzzer, get the
# sanitizer runtime's empty coverage hooks. Two builds compiled the same libraries twice: on a
# cold compiler cache the fuzz targets' own build was 280 s of a fresh machine's 67 minutes.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
case "${1:-}" in
  # clang: GCC took 3x as long to compile the same files with UBSan (the Catch main 114 s against
  # clang's 36 s).
  address) cc=clang cxx=clang++ fuzz=ON flags="-fsanitize=address,undefined -fno-omit-frame-pointer"
    dir="${2:-$repo/build-asan}" ;;
  thread) cc=cc cxx=c++ fuzz=OFF flags="-fsanitize=thread" dir="${2:-$repo/build-tsan}" ;;
  *) echo "usage: scripts/sanitizer-build.sh address|thread [DIR]" >&2; exit 2 ;;
esac
command -v "$cxx" >/dev/null ||
  { echo "sanitizer-build.sh: $cxx is not installed (scripts/install-deps.sh)" >&2; exit 2; }
cache="$dir/CMakeCache.txt"
# A build made by another compiler (build-asan/ was GCC's once), or before the fuzz targets were
# part of it, is made anew.
if [ -f "$cache" ] && { ! grep -qx "CMAKE_CXX_COMPILER:[A-Z]*=$(command -v "$cxx")" "$cache" ||
                        ! grep -qx "MXRUN_FUZZ:BOOL=$fuzz" "$cache"; }; then
  rm -rf "$dir"
fi
if [ ! -f "$dir/build.ninja" ]; then
  CC="$cc" CXX="$cxx" "${CMAKE:-/usr/bin/cmake}" -S "$repo" -B "$dir" -G Ninja \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMXRUN_BUILD_TRAINER=OFF -DMXRUN_FUZZ="$fuzz" \
    -DCMAKE_C_FLAGS="$flags" -DCMAKE_CXX_FLAGS="$flags" \
    -DCMAKE_EXE_LINKER_FLAGS="$flags" -DCMAKE_SHARED_LINKER_FLAGS="$flags" >/dev/null
fi
