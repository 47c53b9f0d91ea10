# shellcheck shell=bash disable=SC2034  # (variables for the scripts that source this)
# Shared by the scripts beside it; source it with
#   source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# It sets
#   root    the checkout
#   build   the build folder: $MXRUN_BUILD_DIR, default $root/build
# and defines have_nvidia_gpu.
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build="${MXRUN_BUILD_DIR:-$root/build}"

# True when nvidia-smi is installed and lists at least one GPU.
have_nvidia_gpu() {
    command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1
}
