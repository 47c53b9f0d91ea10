#!/usr/bin/env bash
# Workers' share of a loaded machine, mxrun against torchrun (and BASELINE_MXRUN, an older build):
# with sched_autogroup each session is one scheduling share. See sessions.py for the settings
# (RUNS, LOAD, NPROC, WORK_S, MXRUN, TORCHRUN, BASELINE_MXRUN). Markdown on stdout.
#   RUNS=5 scripts/bench/sessions.sh
# Runs under $PYTHON (default <repo>/.venv/bin/python3, the project's venv).
set -euo pipefail
script_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo_root="$(cd "$script_dir/../.." && pwd)"
python="${PYTHON:-$repo_root/.venv/bin/python3}"
[ -x "$python" ] || { echo "sessions.sh: python not found: $python" >&2; exit 2; }
exec "$python" "$script_dir/sessions.py" "$@"
