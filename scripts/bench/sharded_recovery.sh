#!/usr/bin/env bash
# Issue 55 on 2 nodes x 2: the copy's cost, a rank lost, a node lost, torchrun beside. See
# sharded_recovery.py (RUNS, STEPS, MXRUN, TORCHRUN, PYTHON).
#   RUNS=3 scripts/bench/sharded_recovery.sh
set -euo pipefail
script_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo_root="$(cd "$script_dir/../.." && pwd)"
python="${PYTHON:-$repo_root/.venv/bin/python3}"
[ -x "$python" ] || { echo "sharded_recovery.sh: python not found: $python" >&2; exit 2; }
exec "$python" "$script_dir/sharded_recovery.py" "$@"
