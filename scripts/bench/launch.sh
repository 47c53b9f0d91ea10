#!/usr/bin/env bash
# Single-node launch benchmark: mxrun against torchrun, side by side (launch-to-exit, peak RSS,
# restart time; mxrun with torchrun 2.x's newer flags, with metrics, and against an older build).
# See launch.py for the cases and the environment (RUNS, TORCHRUN_RUNS, CASES, QUIET_WAIT, MXRUN,
# TORCHRUN, BASELINE_MXRUN). Markdown on stdout, progress on stderr.
#   RUNS=10 scripts/bench/launch.sh
#   RUNS=5 CASES=baseline BASELINE_MXRUN=<old build>/mxrun scripts/bench/launch.sh
# Runs under $PYTHON (default <repo>/.venv/bin/python3, the project's venv).
set -euo pipefail
script_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo_root="$(cd "$script_dir/../.." && pwd)"
python="${PYTHON:-$repo_root/.venv/bin/python3}"
[ -x "$python" ] || { echo "launch.sh: python not found: $python" >&2; exit 2; }
exec "$python" "$script_dir/launch.py" "$@"
