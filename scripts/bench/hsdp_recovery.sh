#!/usr/bin/env bash
# Issue 55, HSDP on 2 nodes x 2: a rank lost under mxrun and under torchft 0.2.0. See
# hsdp_recovery.py (RUNS, STEPS, KILL_STEP, TORCHFT_SITE, MXRUN, TORCHRUN, PYTHON).
#   RUNS=3 scripts/bench/hsdp_recovery.sh
set -euo pipefail
script_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo_root="$(cd "$script_dir/../.." && pwd)"
python="${PYTHON:-$repo_root/.venv/bin/python3}"
[ -x "$python" ] || { echo "hsdp_recovery.sh: python not found: $python" >&2; exit 2; }
exec "$python" "$script_dir/hsdp_recovery.py" "$@"
