#!/usr/bin/env bash
# What FSDP2's redundant copy costs per step, and how fast a lost rank comes back with it. See
# shard_copy.py (RUNS, STEPS, MXRUN, TORCHRUN, PYTHON).
#   RUNS=3 scripts/bench/shard_copy.sh
set -euo pipefail
script_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo_root="$(cd "$script_dir/../.." && pwd)"
python="${PYTHON:-$repo_root/.venv/bin/python3}"
[ -x "$python" ] || { echo "shard_copy.sh: python not found: $python" >&2; exit 2; }
exec "$python" "$script_dir/shard_copy.py" "$@"
