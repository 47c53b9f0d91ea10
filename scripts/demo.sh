#!/usr/bin/env bash
# The main job on this machine: installs dependencies, builds, and runs mxrun launching the
# bundled trainer on 2 CPU workers (or, where the trainer is not built, the PyTorch DDP example).
# Extra arguments go to the trainer / example.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
"$root/scripts/install-deps.sh"
"$root/scripts/build.sh"
bin="${MXRUN_BUILD_DIR:-$root/build}/bin"
export PYTHON_EXEC="${PYTHON_EXEC:-/usr/bin/python3}"  # the Python that has Debian's torch
if [[ -x "$bin/train" ]]; then
  exec "$bin/mxrun" --standalone --nproc_per_node=2 train "$@"
fi
echo "demo: the bundled trainer is not built yet; running the PyTorch DDP example" >&2
exec "$bin/mxrun" --standalone --nproc_per_node=2 "$root/scripts/examples/ddp_allreduce.py" "$@"
