# shellcheck shell=bash disable=SC2034  # (variables for the scripts that source this)
# Shared by the scripts beside it; source it with
#   source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# It sets
#   root    the checkout
#   build   the build folder: $MXRUN_BUILD_DIR, default $root/build
#   cmake   Debian's CMake 3.25 ($CMAKE to override): a pip-installed CMake 4 may come first on PATH
#           and refuses config files that ask for CMake < 3.5
#   venv    the project's Python environment (scripts/python-env.sh): $venv/bin/python3, torchrun
#   ctest_jobs  how many tests ctest runs at once: $MXRUN_CTEST_JOBS, default one and a half per
#           core (most cases wait on processes, timeouts and sockets more than they compute: at
#           -j2 on 2 cores the CPUs were idle 30% of the time; -j3 ran 665 of 665 in 894 s against
#           1049-1057 s at -j2, and -j4 679 of 679 in 973 s with the CPUs 87% busy. CI's first run
#           at -j3 failed two cases, for causes since mended)
# and defines have_nvidia_gpu.
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build="${MXRUN_BUILD_DIR:-$root/build}"
cmake="${CMAKE:-$(command -v /usr/bin/cmake || command -v cmake)}"
venv="${MXRUN_VENV:-$root/.venv}"
ctest_jobs="${MXRUN_CTEST_JOBS:-$(($(nproc) * 3 / 2))}"
[[ "$ctest_jobs" =~ ^[1-9][0-9]*$ ]] ||
  { echo "MXRUN_CTEST_JOBS must be a positive count of tests run at once, not '$ctest_jobs'" >&2; exit 2; }
# ccache hits across checkouts (a fresh clone, CI's): paths relative to the checkout, and the
# working directory left out of the hash (debug info may then name another checkout's folder).
export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$root}" CCACHE_NOHASHDIR="${CCACHE_NOHASHDIR:-1}"

# True when nvidia-smi is installed and lists at least one GPU.
have_nvidia_gpu() {
    command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1
}
