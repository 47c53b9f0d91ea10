#!/usr/bin/env bash
# Rank 0 late to init_process_group: its own call's time under mxrun (the agent's store), mxrun
# with --workers_store=rank0 and torchrun 2.13, side by side (late_rank0.py says how).
#   RUNS=5 LATE=2 scripts/bench/late_rank0.sh
# Runs under $PYTHON (default <repo>/.venv/bin/python3, the project's venv).
set -euo pipefail
script_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo_root="$(cd "$script_dir/../.." && pwd)"
python="${PYTHON:-$repo_root/.venv/bin/python3}"
[ -x "$python" ] || { echo "late_rank0.sh: python not found: $python" >&2; exit 2; }
exec "$python" "$script_dir/late_rank0.py" "$@"
