#!/usr/bin/env bash
# ThreadSanitizer-built copies of Debian 12's own Abseil and gRPC (the same versions and sonames,
# from Debian's source packages with Debian's patches), for `scripts/sanitize.sh thread`. Without
# them TSan cannot see gRPC's synchronisation (its completion queues, absl::Mutex) and reports
# every hand-off between gRPC's threads and ours as a race. Protobuf, OpenSSL and the rest stay
# Debian's: they do no cross-thread synchronisation for us.
#
#   scripts/build-tsan-deps.sh [DIR]    (default <repo>/build-tsan-deps; ~15 minutes on 2 cores)
#
# The libraries land in DIR/lib; sanitize.sh puts them first on LD_LIBRARY_PATH. Idempotent: what
# is built is not built again.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dir="${1:-$repo/build-tsan-deps}"
flags="-fsanitize=thread"
mkdir -p "$dir/src"
cd "$dir/src"

command -v dpkg-source >/dev/null || apt-get install -y -q dpkg-dev >/dev/null
if ! ls -d abseil-*/ grpc-*/ >/dev/null 2>&1; then
  # Source packages need a deb-src entry, added for this download only.
  entry=/etc/apt/sources.list.d/mxrun-tsan-src.sources
  trap 'rm -f "$entry"' EXIT
  printf 'Types: deb-src\nURIs: http://deb.debian.org/debian\nSuites: bookworm\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' > "$entry"
  apt-get update -q >/dev/null
  apt-get source --download-only -q abseil grpc >/dev/null
  rm -f "$entry"
  for dsc in abseil_*.dsc grpc_*.dsc; do dpkg-source -x "$dsc" >/dev/null; done
fi
absl_src="$(ls -d "$dir"/src/abseil-*/ | head -1)"
grpc_src="$(ls -d "$dir"/src/grpc-*/ | head -1)"

if [ ! -f "$dir/lib/libabsl_synchronization.so" ]; then
  "${CMAKE:-/usr/bin/cmake}" -S "$absl_src" -B "$dir/build-absl" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DBUILD_SHARED_LIBS=ON -DCMAKE_CXX_STANDARD=17 -DABSL_PROPAGATE_CXX_STD=ON -DBUILD_TESTING=OFF \
    -DCMAKE_C_FLAGS="$flags" -DCMAKE_CXX_FLAGS="$flags" -DCMAKE_SHARED_LINKER_FLAGS="$flags" \
    -DCMAKE_INSTALL_PREFIX="$dir" -DCMAKE_INSTALL_LIBDIR=lib >/dev/null
  ninja -C "$dir/build-absl" install >/dev/null
fi
if [ ! -f "$dir/lib/libgrpc++.so" ]; then
  # libprotoc is needed only to configure (the code generator is not built); Debian ships it
  # without its development link.
  protoc_lib="$(ls /usr/lib/x86_64-linux-gnu/libprotoc.so* | head -1)"
  "${CMAKE:-/usr/bin/cmake}" -S "$grpc_src" -B "$dir/build-grpc" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DBUILD_SHARED_LIBS=ON -DCMAKE_CXX_STANDARD=17 -DgRPC_ABSL_PROVIDER=package \
    -DgRPC_PROTOBUF_PROVIDER=package -DgRPC_RE2_PROVIDER=package -DgRPC_SSL_PROVIDER=package \
    -DgRPC_ZLIB_PROVIDER=package -DgRPC_CARES_PROVIDER=package -DgRPC_BUILD_TESTS=OFF \
    -DgRPC_BUILD_CODEGEN=OFF -DCMAKE_PREFIX_PATH="$dir" -DProtobuf_PROTOC_LIBRARY="$protoc_lib" \
    -DCMAKE_C_FLAGS="$flags" -DCMAKE_CXX_FLAGS="$flags" -DCMAKE_SHARED_LINKER_FLAGS="$flags" >/dev/null
  ninja -C "$dir/build-grpc" grpc++ grpc gpr >/dev/null
  cp -a "$dir"/build-grpc/lib*.so* "$dir/lib/"
fi
echo "TSan-built Abseil and gRPC in $dir/lib"
