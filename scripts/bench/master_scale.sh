#!/usr/bin/env bash
# The rendezvous master at scale: rdzv_loadgen --reform against a fresh mxrun-master for each N
# (formation, re-formation after one loss, the job's end, the master's peak RSS and CPU), with
# TLS=both, SCRAPE=both or PROGRESS=both each side by side with the plain case. See
# master_scale.py for the cases and the environment (RUNS, NODES, TLS, AGENTS, HEARTBEAT_S, PIN,
# CHANNELS, SCRAPE, PROGRESS, RANKS, MXRUN, MXRUN_MASTER, RDZV_LOADGEN). Markdown on stdout,
# progress on stderr.
#   RUNS=3 scripts/bench/master_scale.sh
# Runs under $PYTHON (default <repo>/.venv/bin/python3, the project's venv).
set -euo pipefail
script_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo_root="$(cd "$script_dir/../.." && pwd)"
python="${PYTHON:-$repo_root/.venv/bin/python3}"
[ -x "$python" ] || { echo "master_scale.sh: python not found: $python" >&2; exit 2; }
exec "$python" "$script_dir/master_scale.py" "$@"
