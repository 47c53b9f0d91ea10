#!/usr/bin/env bash
# What a user runs from an environment where mxrun is installed (a wheel, scripts/check-wheel.sh;
# a source build by pip, scripts/check-pip-install.sh), from that environment alone (its bin/
# first on PATH, no PYTHONPATH): a one-node PyTorch DDP job, whose optimizer's steps the installed
# mxrun-auto-progress.pth reports; Lightning's entry points; `python -m mxrun` with the installed
# module; a two-node job on loopback through the installed mxrun-master with a token, and
# `mxrun status` against it while it runs. Prints one "ok: ..." or "bad: ..." line per check.
#
#   scripts/wheel/check-installed.sh VENV ROOT WORK [--without-torch]
#
# --without-torch (an environment with no PyTorch and no man: Debian 11's, scripts/check-wheel.sh)
# leaves out the manual pages, the DDP jobs and Lightning's entry points; the two nodes then run
# the module's progress worker instead of the DDP example.
#
# Everything binds 127.0.0.1 on ports the kernel picks; every process is bounded by `timeout` and
# stopped by pid.
set -uo pipefail
venv=$1 root=$2 work=$3 with_torch=1
[[ "${4:-}" == --without-torch ]] && with_torch=0
export PATH="$venv/bin:/usr/bin:/bin"
unset PYTHONPATH PYTHON_EXEC VIRTUAL_ENV
say() { echo "$1: $2"; }

if ((with_torch)); then
# The manual pages, where man looks for those of the programs on the PATH (<prefix>/share/man).
for page in mxrun mxrun-master mxrun-multinode; do
  # (mxrun-multinode's page points at mxrun's, which man -w names)
  if found=$(man -w "$page" 2>&1) && [[ "$found" == "$venv/share/man/man1/"* ]]; then
    say ok "man $page finds the installed page ($found)"
  else
    say bad "man $page: $found"
  fi
done
if [[ "$(MANWIDTH=100 man mxrun-multinode 2>&1)" == *"--nproc_per_node"* ]]; then
  say ok "man mxrun-multinode shows mxrun's page"
else
  say bad "man mxrun-multinode does not show mxrun's flags"
fi

# A one-node PyTorch DDP job. The script never imports mxrun: its optimizer's steps are reported
# through the installed mxrun-auto-progress.pth, unless MXRUN_AUTO_PROGRESS=0.
if out=$(timeout 120 mxrun --standalone --nproc_per_node=2 "$root/scripts/examples/ddp_allreduce.py" 2>&1); then
  say ok "one-node PyTorch DDP job (mxrun --standalone --nproc_per_node=2 ddp_allreduce.py): exit 0"
  if [[ "$out" == *"goodput "* && "$out" != *"no progress reports"* ]]; then
    say ok "a script that never imports mxrun reports its optimizer's steps (the installed mxrun-auto-progress.pth)"
  else
    say bad "no progress from the optimizer's steps of ddp_allreduce.py: $(echo "$out" | grep goodput)"
  fi
else
  say bad "one-node PyTorch DDP job: $(echo "$out" | tail -5)"
fi
if out=$(MXRUN_AUTO_PROGRESS=0 timeout 120 mxrun --standalone --nproc_per_node=2 "$root/scripts/examples/ddp_allreduce.py" 2>&1) &&
   [[ "$out" == *"no progress reports"* ]]; then
  say ok "MXRUN_AUTO_PROGRESS=0: no automatic progress reports"
else
  say bad "MXRUN_AUTO_PROGRESS=0: $(echo "$out" | grep goodput)"
fi

# Lightning's callback registry finds mxrun's progress callback through the installed entry points
# (tests/integration/frameworks_test.cc runs a Lightning job with them).
if out=$(python -c 'from importlib.metadata import entry_points as e
print(sorted(p.value for g in ("lightning.pytorch.callbacks_factory", "pytorch_lightning.callbacks_factory") for p in e(group=g)))' 2>&1) &&
   [[ "$out" == "['mxrun._framework_progress:lightning_callbacks', 'mxrun._framework_progress:pytorch_lightning_callbacks']" ]]; then
  say ok "the installed entry points give Lightning mxrun's progress callback"
else
  say bad "the installed Lightning entry points: $out"
fi

fi

# python -m mxrun, and the installed module's progress reports.
if out=$(timeout 120 python -m mxrun --standalone --nproc_per_node=2 "$root/tests/python/progress_worker.py" 30 0.02 2>&1) &&
   [[ "$out" == *"goodput "* && "$out" != *"no progress reports"* ]]; then
  say ok "python -m mxrun with the installed mxrun module: progress reported (goodput counts steps)"
else
  say bad "python -m mxrun with the module: $(echo "$out" | tail -5)"
fi

# Two nodes on loopback through the installed mxrun-master, with a token; mxrun status meanwhile.
token="$work/token"
head -c 24 /dev/urandom | base64 >"$token"
chmod 600 "$token"
# listening_on FILE: the address a master's output FILE says it listens on, within 10 s, or nothing.
listening_on() {
  local found=""
  for _ in $(seq 100); do
    found=$(grep -oE 'listening on [0-9.]+:[0-9]+' "$1" | head -1 | awk '{print $3}')
    [[ -n "$found" ]] && break
    sleep 0.1
  done
  echo "$found"
}
timeout 120 mxrun-master --host=127.0.0.1 --port=0 --token_file="$token" >"$work/master.out" 2>&1 &
master=$!
endpoint=$(listening_on "$work/master.out")
if [[ -z "$endpoint" ]]; then
  say bad "mxrun-master did not say where it listens: $(cat "$work/master.out")"
else
  agents=()
  # Each node's worker runs for about 4 s, long enough for mxrun status to see the job.
  if ((with_torch)); then worker=("$root/scripts/examples/ddp_allreduce.py" --hold-if-world 2 --hold-seconds 4)
  else worker=("$root/tests/python/progress_worker.py" 40 0.1); fi
  for node in 0 1; do
    timeout 120 mxrun --rdzv_backend=c10d --rdzv_endpoint="$endpoint" --rdzv_id=install-check \
      --nnodes=2 --nproc_per_node=1 --rdzv_conf="token_file=$token" "${worker[@]}" \
      >"$work/node$node.out" 2>&1 &
    agents+=($!)
  done
  status=""
  started=$SECONDS
  while ((SECONDS - started < 30)); do
    status=$(timeout 10 mxrun status --timeout=2 --rdzv_endpoint="$endpoint" --rdzv_conf="token_file=$token" 2>&1 || true)
    [[ "$status" == *install-check* && "$status" == *running* ]] && break
    sleep 0.1
  done
  rcs=""
  for pid in "${agents[@]}"; do wait "$pid"; rcs+="$? "; done
  if [[ "$rcs" == "0 0 " ]]; then say ok "two-node job on loopback with a token through the installed mxrun-master: both nodes exit 0"
  else say bad "two-node job: exits $rcs: $(tail -5 "$work/node0.out" "$work/node1.out")"; fi
  if [[ "$status" == *install-check* && "$status" == *running* ]]; then say ok "mxrun status lists the running two-node job"
  else say bad "mxrun status: $(echo "$status" | head -10)"; fi
  refused=$(timeout 10 mxrun status --timeout=2 --rdzv_endpoint="$endpoint" 2>&1 || true)
  if [[ "$refused" != *install-check* ]]; then say ok "mxrun status without the token is refused"
  else say bad "mxrun status without the token listed the job"; fi
fi
[[ -n "${master:-}" ]] && kill "$master" 2>/dev/null

# Mutual TLS, when the caller made certificates (MXRUN_CHECK_CERTS: ca.pem, and node.pem and
# node.key for 127.0.0.1 signed by it; scripts/make-certs.sh): the wheel's programs carry their
# own OpenSSL, linked in.
if [[ -n "${MXRUN_CHECK_CERTS:-}" ]]; then
  certs=$MXRUN_CHECK_CERTS
  timeout 120 mxrun-master --host=127.0.0.1 --port=0 --cert="$certs/node.pem" --key="$certs/node.key" \
    --cacert="$certs/ca.pem" >"$work/tls-master.out" 2>&1 &
  tls_master=$!
  endpoint=$(listening_on "$work/tls-master.out")
  if [[ -z "$endpoint" ]]; then
    say bad "mxrun-master with TLS did not say where it listens: $(cat "$work/tls-master.out")"
  else
    agents=()
    for node in 0 1; do
      timeout 120 mxrun --rdzv_backend=c10d --rdzv_endpoint="$endpoint" --rdzv_id=tls-check \
        --nnodes=2 --nproc_per_node=1 \
        --rdzv_conf="cert=$certs/node.pem,key=$certs/node.key,cacert=$certs/ca.pem" \
        "$root/tests/python/progress_worker.py" 10 0.05 >"$work/tls-node$node.out" 2>&1 &
      agents+=($!)
    done
    rcs=""
    for pid in "${agents[@]}"; do wait "$pid"; rcs+="$? "; done
    if [[ "$rcs" == "0 0 " ]]; then say ok "two-node job over mutual TLS through the installed mxrun-master: both nodes exit 0"
    else say bad "two-node job over TLS: exits $rcs: $(tail -5 "$work/tls-node0.out" "$work/tls-node1.out")"; fi
    plain=$(timeout 10 mxrun status --timeout=2 --rdzv_endpoint="$endpoint" 2>&1 || true)
    if [[ "$plain" != *tls-check* ]]; then say ok "mxrun status without a certificate is refused by the TLS master"
    else say bad "mxrun status without a certificate listed the TLS job"; fi
  fi
  kill "$tls_master" 2>/dev/null
fi
wait 2>/dev/null
