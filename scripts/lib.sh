# shellcheck shell=bash disable=SC2034  # (variables for the scripts that source this)
# Shared by the scripts beside it; source it with
#   source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# It sets
#   root    the checkout
#   build   the build folder: $MXRUN_BUILD_DIR, default $root/build
#   cmake   Debian's CMake 3.25 ($CMAKE to override): a pip-installed CMake 4 may come first on PATH
#           and refuses config files that ask for CMake < 3.5
#   venv    the project's Python environment (scripts/python-env.sh): $venv/bin/python3, torchrun
# and defines have_nvidia_gpu.
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build="${MXRUN_BUILD_DIR:-$root/build}"
cmake="${CMAKE:-$(command -v /usr/bin/cmake || command -v cmake)}"
venv="${MXRUN_VENV:-$root/.venv}"
# ccache hits across checkouts (a fresh clone, CI's): paths relative to the checkout, and the
# working directory left out of the hash (debug info may then name another checkout's folder).
export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$root}" CCACHE_NOHASHDIR="${CCACHE_NOHASHDIR:-1}"

# True when nvidia-smi is installed and lists at least one GPU.
have_nvidia_gpu() {
    command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1
}
