#!/usr/bin/env bash
# Starts one node of a multi-node mxrun job: run it on every node of the job, with the same
# variables everywhere (NODE_RANK aside). The node on MASTER's host hosts the rendezvous master
# unless a standalone mxrun-master serves it (scripts/systemd/mxrun-master.service).
#
#   JOB_ID=exp1 MASTER=node0:29400 NNODES=2 NPROC=4 scripts/launch-node.sh train --model resnet50
#   JOB_ID=exp1 MASTER=node0:29400 NNODES=2:4 scripts/launch-node.sh my_train.py --lr 0.1
#   JOB_ID=exp1 ETCD=etcd1:2379,etcd2:2379,etcd3:2379 NNODES=2:4 scripts/launch-node.sh train
#
# Variables (flags of mxrun given after the script's name are passed on too and win):
#   JOB_ID        job id shared by every node (required; --rdzv_id)
#   MASTER        rendezvous endpoint HOST:PORT (required unless ETCD is set; --rdzv_endpoint)
#   ETCD          etcd members HOST:PORT[,HOST:PORT...] instead of MASTER: the master is elected
#                 among the nodes (or the mxrun-master replicas of MASTER_SERVICE) and keeps its
#                 state in etcd, so that no single machine's loss ends the job (--rdzv_backend=etcd)
#   MASTER_SERVICE  with ETCD: follow this mxrun-master service instead of electing a node
#   NNODES        node count, N or MIN:MAX (required; --nnodes)
#   NPROC         workers per node: a number, gpu, cpu or auto (default gpu when nvidia-smi finds
#                 one, else 1; --nproc_per_node)
#   NODE_RANK     ask for this node rank (optional; otherwise ranks follow host names)
#   MAX_RESTARTS  group restarts after failures (default 3)
#   LOG_DIR       per-rank log folder (optional)
#   TOKEN_FILE    rendezvous token file (optional; the same file on every node)
#   MXRUN         the mxrun binary (default: bin/mxrun of this checkout's build folder,
#                 $MXRUN_BUILD_DIR or build/, else mxrun on PATH)
# Everything after the variables is the entrypoint and its arguments, as for mxrun.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

fail() { echo "launch-node: $*" >&2; exit 2; }
[[ -n "${JOB_ID:-}" ]] || fail "JOB_ID is not set (the job id every node shares, e.g. JOB_ID=exp1)"
if [[ -n "${ETCD:-}" ]]; then
    [[ -z "${MASTER:-}" ]] || fail "set MASTER or ETCD, not both (with ETCD the master is elected)"
    [[ "$ETCD" =~ ^[^,]+(,[^,]+)*$ ]] || fail "ETCD='$ETCD' is not HOST:PORT[,HOST:PORT...]"
else
    [[ -n "${MASTER:-}" ]] || fail "MASTER is not set (the rendezvous endpoint HOST:PORT, e.g. MASTER=node0:29400; or ETCD=HOST:PORT,... for etcd)"
    [[ "$MASTER" =~ ^[^:]+:[0-9]+$ || "$MASTER" =~ ^\[.+\]:[0-9]+$ ]] || fail "MASTER='$MASTER' is not HOST:PORT"
    [[ -z "${MASTER_SERVICE:-}" ]] || fail "MASTER_SERVICE needs ETCD"
fi
[[ -n "${NNODES:-}" ]] || fail "NNODES is not set (N, or MIN:MAX for an elastic job)"
[[ "$NNODES" =~ ^[1-9][0-9]*(:[1-9][0-9]*)?$ ]] || fail "NNODES='$NNODES' is not N or MIN:MAX"
if [[ -z "${NPROC:-}" ]]; then
    if have_nvidia_gpu; then NPROC=gpu; else NPROC=1; fi
fi
[[ "$NPROC" =~ ^([1-9][0-9]*|gpu|cpu|auto)$ ]] || fail "NPROC='$NPROC' is not a number, gpu, cpu or auto"
MAX_RESTARTS="${MAX_RESTARTS:-3}"
[[ "$MAX_RESTARTS" =~ ^[0-9]+$ ]] || fail "MAX_RESTARTS='$MAX_RESTARTS' is not a whole number"
[[ $# -gt 0 ]] || fail "no entrypoint: give what to run, e.g. 'train --epochs 10' or 'my_train.py'"

if [[ -z "${MXRUN:-}" ]]; then
    if [[ -x "$build/bin/mxrun" ]]; then MXRUN="$build/bin/mxrun"; else MXRUN=mxrun; fi
fi
if [[ -n "${ETCD:-}" ]]; then
    flags=(--rdzv_backend=etcd --rdzv_endpoint="$ETCD")
else
    flags=(--rdzv_backend=c10d --rdzv_endpoint="$MASTER")
fi
flags+=(--rdzv_id="$JOB_ID" --nnodes="$NNODES" --nproc_per_node="$NPROC"
        --max_restarts="$MAX_RESTARTS")
[[ -n "${NODE_RANK:-}" ]] && flags+=(--node_rank="$NODE_RANK")
[[ -n "${LOG_DIR:-}" ]] && flags+=(--log_dir="$LOG_DIR")
conf=()
[[ -n "${TOKEN_FILE:-}" ]] && conf+=("token_file=$TOKEN_FILE")
[[ -n "${MASTER_SERVICE:-}" ]] && conf+=("master_service=$MASTER_SERVICE")
if [[ ${#conf[@]} -gt 0 ]]; then
    flags+=(--rdzv_conf="$(IFS=,; echo "${conf[*]}")")
fi
exec "$MXRUN" "${flags[@]}" "$@"
