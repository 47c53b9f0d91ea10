#!/usr/bin/env bash
# Builds mxrun's wheel: `pip install dist/mxrun-*.whl` gives an environment the mxrun, mxrun-multinode
# and mxrun-master programs (on its PATH, in bin/), the libraries they load (in lib/mxrun/), and
# the `mxrun` Python module (python/mxrun; `python -m mxrun` runs the launcher).
#
#   scripts/build-wheel.sh [OUT_DIR]        (default: dist/)
#
# The programs come from scripts/build.sh; scripts/vendor-libs.sh copies them with every library
# they load except glibc's and the C++ runtime's (libstdc++, libgcc_s), which every Linux that
# runs them has, as manylinux wheels do. The platform tag is the one `auditwheel show` names for
# the wheel (scripts/python-env.sh wheel: .venv-wheel); glibc's symbol versions decide it: a build
# on Debian 12 (glibc 2.36) needs glibc 2.36 or newer. Prints the wheel's path, size and tag.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
out="${1:-$root/dist}"
programs=(mxrun mxrun-multinode mxrun-master)

"$root/scripts/install-deps.sh"
MXRUN_BUILD_TARGETS="${programs[*]} man-pages" "$root/scripts/build.sh" >&2
wheel_venv=$("$root/scripts/python-env.sh" wheel)

version=$("$build/bin/mxrun" --version | awk '{print $2}')
package_version=$("$venv/bin/python3" -c "exec(open('$root/python/mxrun/_version.py').read()); print(__version__)")
if [[ "$version" != "$package_version" ]]; then
  echo "build-wheel: mxrun --version says $version, python/mxrun/_version.py $package_version: make them one" >&2
  exit 1
fi

stage=$(mktemp -d "${TMPDIR:-/tmp}/mxrun-wheel.XXXXXX")
trap 'rm -rf -- "$stage"' EXIT
# The wheel's files laid out as pip installs them under a prefix: bin/ and lib/mxrun/.
"$root/scripts/vendor-libs.sh" --system-cxx "$stage/prefix/bin" "$stage/prefix/lib/mxrun" \
  "${programs[@]/#/$build/bin/}"
env -i "$stage/prefix/bin/mxrun" --version >/dev/null
# The manual pages, where man looks for those of the programs in the environment's bin/.
install -d "$stage/prefix/share/man/man1"
install -m 0644 "$build"/man/{mxrun,mxrun-master,mxrun-multinode}.1 "$stage/prefix/share/man/man1/"
# Inside the wheel the programs lie in mxrun-V.data/scripts and the libraries in
# mxrun-V.data/data/lib/mxrun: a second RPATH entry for that layout lets auditwheel find them
# there (installed, the first entry finds them; the second is tried only for glibc's and the C++
# runtime's libraries, which it does not hold).
for program in "${programs[@]}"; do
  patchelf --force-rpath --set-rpath '$ORIGIN/../lib/mxrun:$ORIGIN/../data/lib/mxrun' "$stage/prefix/bin/$program"
done

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
if [[ "$tag" != manylinux_* ]]; then
  echo "$show" >&2
  echo "build-wheel: auditwheel finds the wheel consistent with '${tag:-no tag}', not a manylinux one (above: why)" >&2
  exit 1
fi
rm -f "$out"/mxrun-"$version"-*.whl
wheel=$("$venv/bin/python3" "$root/scripts/wheel/assemble_wheel.py" "$version" "$tag" \
  "$root/python/mxrun" "$stage/prefix" "$out")
echo "build-wheel: $wheel ($(du -h "$wheel" | cut -f1), tag $tag: glibc ${tag#manylinux_} or newer," \
     "$(ls "$stage/prefix/lib/mxrun" | wc -l) vendored libraries)" | sed -E 's/glibc ([0-9]+)_([0-9]+)_x86_64/glibc \1.\2/'
