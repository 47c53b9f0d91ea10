#!/usr/bin/env bash
# No single point of failure, measured side by side: mxrun --rdzv_backend=etcd against torchrun
# 2.13's etcd-v2 and c10d backends (see etcd_ha.py for the cases). Markdown on stdout.
#   RUNS=5 SCALE_NODES="8 16 32" scripts/bench/etcd_ha.sh
# Runs under $PYTHON (default <repo>/.venv/bin/python3, the project's venv); the reference is
# $TORCHRUN (default <repo>/.venv/bin/torchrun: torchrun 2.13 with python-etcd from that venv).
set -euo pipefail
script_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo_root="$(cd "$script_dir/../.." && pwd)"
exec "${PYTHON:-$repo_root/.venv/bin/python3}" "$script_dir/etcd_ha.py" "$@"
