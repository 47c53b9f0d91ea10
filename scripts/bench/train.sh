#!/usr/bin/env bash
# Training-throughput benchmark: mxrun's bundled trainer against the PyTorch 2.13 DDP reference
# (scripts/bench/reference/ddp_resnet.py under torchrun 2.13), side by side. See train.py for what
# is compared and the environment (RUNS, MODEL, WIDTH, BATCH, STEPS, LOG_EVERY, N, DEVICE, AMP,
# NPROC, TIMEOUT, QUIET_WAIT, TRAINER_LAUNCHER, MXRUN, TORCHRUN). Markdown on stdout, progress on
# stderr.
#   RUNS=3 scripts/bench/train.sh
# Runs under $PYTHON (default <repo>/.venv/bin/python3, the project's venv).
set -euo pipefail
script_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo_root="$(cd "$script_dir/../.." && pwd)"
python="${PYTHON:-$repo_root/.venv/bin/python3}"
[ -x "$python" ] || { echo "train.sh: python not found: $python" >&2; exit 2; }
exec "$python" "$script_dir/train.py" "$@"
