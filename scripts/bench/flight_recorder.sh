#!/usr/bin/env bash
# The flight recorder's cost per collective on Gloo, on against off, side by side. See
# flight_recorder.py (RUNS, ITERS, MXRUN, PYTHON).
#   RUNS=5 ITERS=2000 scripts/bench/flight_recorder.sh
set -euo pipefail
script_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo_root="$(cd "$script_dir/../.." && pwd)"
python="${PYTHON:-$repo_root/.venv/bin/python3}"
[ -x "$python" ] || { echo "flight_recorder.sh: python not found: $python" >&2; exit 2; }
exec "$python" "$script_dir/flight_recorder.py" "$@"
