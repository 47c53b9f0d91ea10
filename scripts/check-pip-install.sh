#!/usr/bin/env bash
# mxrun built the way Python's packaging tools build it (pyproject.toml, scikit-build-core; issue
# 58), checked as a user gets it (scripts/test.sh runs this in CI):
#
#   scripts/check-pip-install.sh
#
# 1. `pip install .` from the checkout, into a fresh virtual environment that holds only PyTorch
#    2.13 (CPU): the three programs on its PATH, the module with its auto-progress .pth, and
#    entry points equal to python/entry_points.txt (the tests' and the hand-assembled wheel's);
#    then what a user runs from it (scripts/wheel/check-installed.sh: a one-node DDP job, the
#    module's progress, a two-node job through its mxrun-master with a token, `mxrun status`);
# 2. `python -m build --sdist` makes the sdist: the sources, none of the checkout's build folders
#    or environments;
# 3. `pip wheel` builds a py3-none wheel from the unpacked sdist, which installs in place of the
#    first and runs a one-node job.
# The builds use Debian's CMake and a build folder inside the source tree, with ccache's paths
# relative to it, so that the sdist's build hits the checkout's cache entries. Prints
# "check-pip-install: N passed, N failed".
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
check_name=check-pip-install
# shellcheck source-path=SCRIPTDIR source=wheel/checks.sh
source "$root/scripts/wheel/checks.sh"
ms_since() { echo $((($(date +%s%N) - $1) / 1000000)); }

"$root/scripts/install-deps.sh" >&2
wheel_venv=$("$root/scripts/python-env.sh" wheel)
work=$(mktemp -d "${TMPDIR:-/tmp}/mxrun-check-pip.XXXXXX")
trap 'rm -rf -- "$work"' EXIT
version=$(/usr/bin/python3 -c "exec(open('$root/python/mxrun/_version.py').read()); print(__version__)")
# Debian's CMake (lib.sh: a pip-installed CMake 4 may come first on PATH), all cores, and the
# compilers scripts/build.sh's CMake finds: under pip it found /usr/bin/x86_64-linux-gnu-g++, the
# same GCC by another name, which ccache hashes apart, so nothing hit the checkout's build.
export CMAKE_EXECUTABLE="$cmake" CMAKE_BUILD_PARALLEL_LEVEL="$(nproc)"
export CC=/usr/bin/cc CXX=/usr/bin/c++
pip_quiet=(-q --disable-pip-version-check)

# 1. pip install . into a fresh environment with PyTorch alone.
fresh_torch_venv "$work/venv"
t0=$(date +%s%N)
if ! CCACHE_BASEDIR="$root" "$work/venv/bin/python3" -m pip install "${pip_quiet[@]}" \
     --config-settings=build-dir=build-pip "$root" >"$work/pip-install.log" 2>&1; then
  tail -30 "$work/pip-install.log"
  echo "check-pip-install: pip install . failed (the whole log above)"
  exit 1
fi
ok "pip install . into a fresh venv with $torch_pin: built and installed in $(ms_since "$t0") ms"
# Stripped as a wheel's programs are: scikit-build-core strips only Release builds by default, and
# this one is RelWithDebInfo (pyproject.toml's install.strip).
if readelf -S "$work/venv/bin/mxrun" | grep -q '\.debug_info'; then
  bad "the installed mxrun carries debug info (pyproject.toml: install.strip)"
else
  ok "the installed mxrun carries no debug info ($(du -h "$work/venv/bin/mxrun" | cut -f1))"
fi
for program in mxrun mxrun-multinode mxrun-master; do
  if out=$("$work/venv/bin/$program" --version 2>&1) && [[ "$out" == *"$version"* ]]; then
    ok "$program is installed in the venv's bin/ and says $version"
  else
    bad "$program in the venv's bin/: $out"
  fi
done
site=$("$work/venv/bin/python3" -c 'import sysconfig; print(sysconfig.get_paths()["platlib"])')
if out=$("$work/venv/bin/python3" -c 'import mxrun; print(mxrun.__version__, mxrun.__file__)' 2>&1) &&
   [[ "$out" == "$version $site/mxrun/__init__.py" ]]; then
  ok "the mxrun module $version is installed in the venv's site-packages"
else
  bad "the mxrun module: $out"
fi
if cmp -s "$root/python/mxrun-auto-progress.pth" "$site/mxrun-auto-progress.pth"; then
  ok "mxrun-auto-progress.pth is installed beside the module"
else
  bad "mxrun-auto-progress.pth is missing from $site"
fi
# The entry points pip installed (from pyproject.toml) are those of python/entry_points.txt.
if out=$("$work/venv/bin/python3" - "$root/python/entry_points.txt" <<'PY' 2>&1
import configparser, sys
from importlib.metadata import distribution
def points(text):
    parser = configparser.ConfigParser(delimiters=("=",))
    parser.optionxform = str
    parser.read_string(text)
    return {(g, n, v) for g in parser.sections() for n, v in parser[g].items()}
installed = points(distribution("mxrun").read_text("entry_points.txt"))
wanted = points(open(sys.argv[1]).read())
print("same" if installed == wanted else f"installed {sorted(installed)}, python/entry_points.txt {sorted(wanted)}")
PY
) && [[ "$out" == same ]]; then
  ok "the installed entry points are python/entry_points.txt's"
else
  bad "entry points: $out"
fi
count_installed_checks < <(bash "$root/scripts/wheel/check-installed.sh" "$work/venv" "$root" "$work" 2>&1)

# 2. The sdist.
t0=$(date +%s%N)
if ! "$wheel_venv/bin/python3" -m build --sdist --outdir "$work/dist" "$root" >"$work/sdist.log" 2>&1; then
  tail -20 "$work/sdist.log"
  echo "check-pip-install: python -m build --sdist failed"
  exit 1
fi
sdist="$work/dist/mxrun-$version.tar.gz"
listing=$(tar -tzf "$sdist" | sed "s|^mxrun-$version/||")
missing=""
for file in pyproject.toml CMakeLists.txt python/mxrun/__init__.py python/mxrun-auto-progress.pth \
            python/README.md launcher/main.cc proto/mxrun.proto; do
  grep -qxF "$file" <<<"$listing" || missing+=" $file"
done
stray=$(grep -E '^(build[^/]*|\.venv[^/]*|dist|Testing)/' <<<"$listing" | head -3 || true)
if [[ -z "$missing" && -z "$stray" ]]; then
  ok "python -m build --sdist: $(du -h "$sdist" | cut -f1), $(wc -l <<<"$listing") files, no build folder or environment, in $(ms_since "$t0") ms"
else
  bad "the sdist lacks:${missing:- nothing}; holds: ${stray:-nothing stray}"
fi

# 3. A wheel from the unpacked sdist, installed in place of the first build.
mkdir -p "$work/src"
tar -xzf "$sdist" -C "$work/src"
t0=$(date +%s%N)
if CCACHE_BASEDIR="$work/src/mxrun-$version" "$work/venv/bin/python3" -m pip wheel "${pip_quiet[@]}" \
     --no-deps --config-settings=build-dir=build-pip --wheel-dir "$work/wheels" \
     "$work/src/mxrun-$version" >"$work/pip-wheel.log" 2>&1; then
  wheel=$(ls "$work"/wheels/mxrun-*.whl)
  if [[ "$(basename "$wheel")" == "mxrun-$version-py3-none-linux_x86_64.whl" ]]; then
    ok "pip wheel from the sdist: $(basename "$wheel") ($(du -h "$wheel" | cut -f1)) in $(ms_since "$t0") ms"
  else
    bad "pip wheel from the sdist made $(basename "$wheel"), not a py3-none-linux_x86_64 wheel"
  fi
  "$work/venv/bin/python3" -m pip install "${pip_quiet[@]}" --force-reinstall --no-deps "$wheel" \
    >"$work/pip-install-wheel.log" 2>&1 || bad "installing the sdist's wheel: $(tail -5 "$work/pip-install-wheel.log")"
  if out=$(PATH="$work/venv/bin:/usr/bin:/bin" timeout 120 mxrun --standalone --nproc_per_node=2 \
             "$root/scripts/examples/ddp_allreduce.py" 2>&1); then
    ok "the sdist's build runs a one-node PyTorch DDP job"
  else
    bad "the sdist's build, one-node job: $(echo "$out" | tail -5)"
  fi
else
  tail -30 "$work/pip-wheel.log"
  bad "pip wheel from the unpacked sdist failed (its log above)"
fi

report_checks
