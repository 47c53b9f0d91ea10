#!/usr/bin/env bash
# Hang detection benchmark: from the moment a rank hangs to the group restarted, mxrun against
# torchrun, side by side on the same workers (PyTorch's file timer, mxrun's heartbeat rule, the
# exit barrier). See hang.py for the cases and the environment (RUNS, TIMEOUT, TORCHRUN_BOUND,
# MXRUN, TORCHRUN). Markdown on stdout, progress on stderr.
#   RUNS=5 TIMEOUT=2 scripts/bench/hang.sh
# Runs under $PYTHON (default <repo>/.venv/bin/python3, the project's venv; it needs PyTorch).
set -euo pipefail
script_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo_root="$(cd "$script_dir/../.." && pwd)"
python="${PYTHON:-$repo_root/.venv/bin/python3}"
[ -x "$python" ] || { echo "hang.sh: python not found: $python" >&2; exit 2; }
exec "$python" "$script_dir/hang.py" "$@"
