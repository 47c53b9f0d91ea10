#!/usr/bin/env bash
# No single point of failure, measured side by side: mxrun --rdzv_backend=etcd against torchrun's
# etcd-v2 and c10d backends (see etcd_ha.py for the cases). Markdown on stdout.
#   RUNS=5 SCALE_NODES="8 16 32" scripts/bench/etcd_ha.sh
set -euo pipefail
exec /usr/bin/python3 "$(dirname "${BASH_SOURCE[0]}")/etcd_ha.py" "$@"
