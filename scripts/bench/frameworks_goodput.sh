#!/usr/bin/env bash
# Goodput of unmodified Lightning, Transformers Trainer and Accelerate jobs under mxrun against
# their own logs. See frameworks_goodput.py for the settings
# (RUNS, STEPS, KILL_STEP, STEP_SLEEP, JOBS, MXRUN). Markdown on stdout.
#   RUNS=5 scripts/bench/frameworks_goodput.sh
# Runs under $PYTHON (default <repo>/.venv/bin/python3, the project's venv).
set -euo pipefail
script_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo_root="$(cd "$script_dir/../.." && pwd)"
python="${PYTHON:-$repo_root/.venv/bin/python3}"
[ -x "$python" ] || { echo "frameworks_goodput.sh: python not found: $python" >&2; exit 2; }
exec "$python" "$script_dir/frameworks_goodput.py" "$@"
