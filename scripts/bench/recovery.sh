#!/usr/bin/env bash
# Recovery and cold start, measured side by side: mxrun + the bundled trainer (in-process restart,
# and the old way for comparison) against torchrun 2.13 + the PyTorch DDP reference resuming from
# its checkpoint (scripts/bench/reference/ddp_resnet.py). See recovery.py for the cases. Markdown
# on stdout.
#   RUNS=5 scripts/bench/recovery.sh
# Runs under $PYTHON (default <repo>/.venv/bin/python3, the project's venv); the reference is
# $TORCHRUN (default <repo>/.venv/bin/torchrun: torchrun 2.13 from that venv).
set -euo pipefail
script_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo_root="$(cd "$script_dir/../.." && pwd)"
exec "${PYTHON:-$repo_root/.venv/bin/python3}" "$script_dir/recovery.py" "$@"
