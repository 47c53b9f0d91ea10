#!/usr/bin/env bash
# One line instead of world-size copies: copies of a warning and each line's delay, mxrun (default
# window, window 0) against torchrun. See log_collapse.py (N, RUNS, MXRUN, TORCHRUN, PYTHON).
#   N=64 RUNS=5 scripts/bench/log_collapse.sh
set -euo pipefail
script_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo_root="$(cd "$script_dir/../.." && pwd)"
python="${PYTHON:-$repo_root/.venv/bin/python3}"
[ -x "$python" ] || { echo "log_collapse.sh: python not found: $python" >&2; exit 2; }
exec "$python" "$script_dir/log_collapse.py" "$@"
