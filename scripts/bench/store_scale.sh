#!/usr/bin/env bash
# The workers' store at scale: N simulated ranks against mxrun's store and PyTorch's own
# TCPStore server, side by side (store_scale.py says how).
#   RUNS=3 RANKS=1024,4096,16384 scripts/bench/store_scale.sh
# Runs under $PYTHON (default <repo>/.venv/bin/python3, the project's venv).
set -euo pipefail
script_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo_root="$(cd "$script_dir/../.." && pwd)"
python="${PYTHON:-$repo_root/.venv/bin/python3}"
[ -x "$python" ] || { echo "store_scale.sh: python not found: $python" >&2; exit 2; }
exec "$python" "$script_dir/store_scale.py" "$@"
