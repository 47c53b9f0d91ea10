#!/usr/bin/env bash
# Multi-node rendezvous benchmark: mxrun against torchrun (dynamic c10d rendezvous), every "node" a
# real agent process on this machine, over loopback: a dead node (killed, silent), a worker
# failure, round formation with N agents, and rdzv_loadgen against one mxrun-master. See
# rendezvous.py for the cases and the environment (RUNS, SCALE_NODES, LOADGEN_NODES, the torchrun
# bounds, MXRUN, MXRUN_MASTER, RDZV_LOADGEN, TORCHRUN). Markdown on stdout, progress on stderr.
#   RUNS=3 scripts/bench/rendezvous.sh
# Runs under $PYTHON (default <repo>/.venv/bin/python3, the project's venv).
set -euo pipefail
script_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo_root="$(cd "$script_dir/../.." && pwd)"
python="${PYTHON:-$repo_root/.venv/bin/python3}"
[ -x "$python" ] || { echo "rendezvous.sh: python not found: $python" >&2; exit 2; }
exec "$python" "$script_dir/rendezvous.py" "$@"
