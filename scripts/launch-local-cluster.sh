#!/usr/bin/env bash
# Runs an N-node mxrun job on this one machine, for trying things out: N agents (one per
# "node") rendezvous on 127.0.0.1, each starting NPROC workers (default 1). Output lines carry
# [nNODE rRANK]; the script exits with the first non-zero exit code of the nodes (0 when all
# succeed). Ctrl-C or SIGTERM stops every node (their workers get the usual grace period).
#
#   scripts/launch-local-cluster.sh 2 train --width 8 --epochs 1 --synthetic_train 2048
#   NPROC=2 scripts/launch-local-cluster.sh 3 --no_python hostname
#
# Variables: NPROC (workers per node, default 1), MAX_RESTARTS (default 3), JOB_ID (default
# local-<pid>), MXRUN (as in launch-node.sh), ETCD (etcd members HOST:PORT,...: the master is
# elected in etcd instead of hosted at a fixed port, as launch-node.sh). The port is any free one
# on 127.0.0.1.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
fail() { echo "launch-local-cluster: $*" >&2; exit 2; }
[[ $# -ge 2 ]] || fail "usage: launch-local-cluster.sh N ENTRYPOINT [ARGS...]"
nodes=$1
shift
[[ "$nodes" =~ ^[1-9][0-9]*$ && "$nodes" -le 64 ]] || fail "N='$nodes' is not a node count from 1 to 64"
if [[ -z "${ETCD:-}" ]]; then
    port=$(/usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])') ||
        fail "cannot find a free port (python3 is needed)"
    export MASTER="127.0.0.1:$port"
fi
export JOB_ID="${JOB_ID:-local-$$}" NNODES="$nodes" NPROC="${NPROC:-1}"
export MAX_RESTARTS="${MAX_RESTARTS:-3}"
pids=()
stop() {
    trap - INT TERM
    for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
}
trap stop INT TERM
for ((n = 0; n < nodes; n++)); do
    NODE_RANK=$n "$root/scripts/launch-node.sh" "$@" &
    pids+=($!)
done
status=0
for pid in "${pids[@]}"; do
    rc=0
    wait "$pid" || rc=$?
    # A signal caught by the trap interrupts wait (status > 128) while the node still runs down its
    # grace period: wait for it again, for its own exit status.
    while ((rc > 128)) && kill -0 "$pid" 2>/dev/null; do
        rc=0
        wait "$pid" || rc=$?
    done
    if [[ $rc -ne 0 && $status -eq 0 ]]; then status=$rc; fi
done
exit "$status"
