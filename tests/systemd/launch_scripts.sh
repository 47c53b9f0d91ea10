#!/usr/bin/env bash
# scripts/launch-local-cluster.sh and scripts/launch-node.sh: a 2-node job of 2 workers each on
# 127.0.0.1 forms one world of 4, and bad variables are refused with exit code 2.
#   launch_scripts.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1
root=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export MXRUN="$build/bin/mxrun"

NPROC=2 timeout 120 "$root/scripts/launch-local-cluster.sh" 2 \
    --no_python "$build/bin/test_child" --env-out="$tmp" > "$tmp/out" 2>&1 || {
    cat "$tmp/out"; echo "launch-local-cluster failed"; exit 1; }
for rank in 0 1 2 3; do
    grep -q '^WORLD_SIZE=4$' "$tmp/env.$rank" || { echo "rank $rank: no WORLD_SIZE=4"; cat "$tmp/out"; exit 1; }
    grep -q '^TORCHELASTIC_RUN_ID=local-' "$tmp/env.$rank" || { echo "rank $rank: run id"; exit 1; }
done
# Both nodes took part: GROUP_RANK 0 and 1 are each there twice.
[[ $(grep -h '^GROUP_RANK=' "$tmp"/env.* | sort | uniq -c | awk '{print $1}' | tr -d '\n') == 22 ]]

# The same job with the master elected in etcd (ETCD=...): a private etcd member on kernel-chosen
# loopback ports, stopped by pid.
free_port() { /usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
client_port=$(free_port)
peer_port=$(free_port)
/usr/bin/etcd --name solo --data-dir "$tmp/etcd" \
    --listen-client-urls "http://127.0.0.1:$client_port" --advertise-client-urls "http://127.0.0.1:$client_port" \
    --listen-peer-urls "http://127.0.0.1:$peer_port" --initial-advertise-peer-urls "http://127.0.0.1:$peer_port" \
    --initial-cluster "solo=http://127.0.0.1:$peer_port" --log-level error --logger zap > "$tmp/etcd.log" 2>&1 &
etcd_pid=$!
trap 'kill -KILL "$etcd_pid" 2>/dev/null || true; rm -rf "$tmp"' EXIT
mkdir "$tmp/etcd-env"
NPROC=2 ETCD="127.0.0.1:$client_port" timeout 120 "$root/scripts/launch-local-cluster.sh" 2 \
    --no_python "$build/bin/test_child" --env-out="$tmp/etcd-env" > "$tmp/etcd-out" 2>&1 || {
    cat "$tmp/etcd-out" "$tmp/etcd.log"; echo "launch-local-cluster with ETCD failed"; exit 1; }
for rank in 0 1 2 3; do
    grep -q '^WORLD_SIZE=4$' "$tmp/etcd-env/env.$rank" || { echo "etcd rank $rank: no WORLD_SIZE=4"; cat "$tmp/etcd-out"; exit 1; }
done
grep -q 'rendezvous master elected in etcd' "$tmp/etcd-out" || { cat "$tmp/etcd-out"; echo "no master elected in etcd"; exit 1; }
kill -KILL "$etcd_pid"
wait "$etcd_pid" 2>/dev/null || true

# A failing job's exit code comes back.
set +e
NPROC=1 MAX_RESTARTS=0 timeout 120 "$root/scripts/launch-local-cluster.sh" 2 \
    --no_python "$build/bin/test_child" --exit=3 --only-rank=1 > "$tmp/fail" 2>&1
rc=$?
set -e
[[ $rc -eq 1 ]] || { cat "$tmp/fail"; echo "failing job: exit $rc, expected 1"; exit 1; }

# Missing or malformed variables: exit 2 with the variable named.
expect_usage() {
    local needle=$1; shift
    set +e
    out=$(env "$@" "$root/scripts/launch-node.sh" train 2>&1)
    local code=$?
    set -e
    [[ $code -eq 2 && "$out" == *"$needle"* ]] || { echo "expected exit 2 naming $needle, got $code: $out"; exit 1; }
}
expect_usage JOB_ID -u JOB_ID MASTER=h:1 NNODES=2
expect_usage "MASTER='h'" JOB_ID=j MASTER=h NNODES=2
expect_usage "NNODES='0'" JOB_ID=j MASTER=h:1 NNODES=0
expect_usage "NPROC='x'" JOB_ID=j MASTER=h:1 NNODES=2 NPROC=x
expect_usage "MASTER or ETCD" JOB_ID=j MASTER=h:1 ETCD=e:2379 NNODES=2
expect_usage "MASTER_SERVICE needs ETCD" JOB_ID=j MASTER=h:1 MASTER_SERVICE=s NNODES=2
set +e
"$root/scripts/launch-local-cluster.sh" zero train > /dev/null 2>&1; rc=$?
set -e
[[ $rc -eq 2 ]]
echo "launch scripts work"
