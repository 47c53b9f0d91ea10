#!/usr/bin/env bash
# Builds mxrun's wheel: `pip install dist/mxrun-*.whl` gives an environment the mxrun, mxrun-multinode
# and mxrun-master programs (on its PATH, in bin/), their manual pages and the `mxrun` Python
# module (python/mxrun; `python -m mxrun` runs the launcher).
#
#   scripts/build-wheel.sh [OUT_DIR]        (default: dist/)
#
# manylinux_2_28, as PyTorch's own wheels: it installs on RHEL/Rocky/Alma 8 and newer, Ubuntu
# 20.04 and newer, Debian 11 and newer. The programs are built with zig's compilers for glibc 2.28
# (`-target x86_64-linux-gnu.2.28`) and link every library statically but glibc: gRPC, Protobuf,
# Abseil, OpenSSL, hwloc and the rest come from scripts/wheel/build-glibc-deps.sh (built once from
# Debian 12's sources, cached), and LLVM's libc++, so no C++ runtime is needed where it runs (GCC
# 8's is enough, none at all too). Their own build folder is build-wheel/ ($MXRUN_WHEEL_BUILD_DIR).
# The platform tag is the one `auditwheel show` names for the wheel (scripts/python-env.sh wheel:
# .venv-wheel), and anything newer than manylinux_2_28 is refused. Prints the wheel's path, size
# and tag.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
out="${1:-$root/dist}"
programs=(mxrun mxrun-multinode mxrun-master)
floor=2.28  # the newest glibc the wheel may need
wheel_build="${MXRUN_WHEEL_BUILD_DIR:-$root/build-wheel}"

"$root/scripts/install-deps.sh"
deps=$("$root/scripts/wheel/build-glibc-deps.sh")
wheel_venv=$("$root/scripts/python-env.sh" wheel)
ninja=$(command -v /usr/bin/ninja || command -v ninja)
"$root/scripts/wheel/zig-toolchain.sh" "$wheel_build/toolchain" "$deps"
# hwloc through pkg-config: the .pc of the deps' prefix only, never the machine's; ccache knows
# the compiler by zig's version (zig-toolchain.sh says why).
export PKG_CONFIG_LIBDIR="$deps/lib/pkgconfig" PKG_CONFIG_PATH= \
  CCACHE_COMPILERCHECK="string:$(cat "$wheel_build/toolchain/compiler-id")"
"$cmake" -S "$root" -B "$wheel_build" -G Ninja -DCMAKE_MAKE_PROGRAM="$ninja" \
  -DCMAKE_TOOLCHAIN_FILE="$wheel_build/toolchain/toolchain.cmake" -DCMAKE_PREFIX_PATH="$deps" \
  -DCMAKE_BUILD_TYPE=Release -DMXRUN_BUILD_TESTS=OFF -DMXRUN_BUILD_TRAINER=OFF >&2
"$cmake" --build "$wheel_build" --target "${programs[@]}" man-pages >&2

version=$("$wheel_build/bin/mxrun" --version | awk '{print $2}')
package_version=$("$venv/bin/python3" -c "exec(open('$root/python/mxrun/_version.py').read()); print(__version__)")
if [[ "$version" != "$package_version" ]]; then
  echo "build-wheel: mxrun --version says $version, python/mxrun/_version.py $package_version: make them one" >&2
  exit 1
fi

stage=$(mktemp -d "${TMPDIR:-/tmp}/mxrun-wheel.XXXXXX")
trap 'rm -rf -- "$stage"' EXIT
# The wheel's files laid out as pip installs them under a prefix: bin/ and share/man/man1.
install -d "$stage/prefix/bin" "$stage/prefix/share/man/man1"
for program in "${programs[@]}"; do
  install -m 0755 "$wheel_build/bin/$program" "$stage/prefix/bin/"
  strip --strip-unneeded "$stage/prefix/bin/$program"
  # Nothing but glibc's own libraries (in glibc 2.28, libpthread, libdl and librt are still apart).
  others=$(readelf -d "$stage/prefix/bin/$program" | sed -nE 's/.*\(NEEDED\).*\[(.*)\]/\1/p' |
           grep -vxE 'lib(c|m|pthread|dl|rt)\.so\.[0-9]+|ld-linux-x86-64\.so\.2' || true)
  if [[ -n "$others" ]]; then
    echo "build-wheel: $program needs shared libraries other than glibc's: $(echo $others)" >&2
    exit 1
  fi
done
env -i "$stage/prefix/bin/mxrun" --version >/dev/null
install -m 0644 "$wheel_build"/man/{mxrun,mxrun-master,mxrun-multinode}.1 "$stage/prefix/share/man/man1/"

# First with the generic tag, then with the one auditwheel finds for it.
unrepaired=$("$venv/bin/python3" "$root/scripts/wheel/assemble_wheel.py" "$version" linux_x86_64 \
  "$root/python/mxrun" "$stage/prefix" "$stage/unrepaired")
show=$("$wheel_venv/bin/auditwheel" show "$unrepaired" 2>&1) || {
  echo "$show" >&2
  echo "build-wheel: auditwheel show failed" >&2
  exit 1
}
tag=$(echo "$show" | tr '\n' ' ' | grep -oE 'consistent with the following platform tag: +"[a-z0-9_]+"' |
      grep -oE '"[a-z0-9_]+"' | tr -d '"')
if ! [[ "$tag" =~ ^manylinux_2_([0-9]+)_x86_64$ ]] || (( BASH_REMATCH[1] > ${floor#2.} )); then
  echo "$show" >&2
  echo "build-wheel: auditwheel finds the wheel consistent with '${tag:-no tag}', not manylinux_2_${floor#2.} or lower (above: why)" >&2
  exit 1
fi
rm -f "$out"/mxrun-"$version"-*.whl
wheel=$("$venv/bin/python3" "$root/scripts/wheel/assemble_wheel.py" "$version" "$tag" \
  "$root/python/mxrun" "$stage/prefix" "$out")
echo "build-wheel: $wheel ($(du -h "$wheel" | cut -f1), tag $tag: glibc ${tag#manylinux_} or newer," \
     "no vendored library)" | sed -E 's/glibc ([0-9]+)_([0-9]+)_x86_64/glibc \1.\2/'
