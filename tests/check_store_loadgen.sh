#!/bin/bash
# The store benchmark's tools still do what scripts/bench/store_scale.py reads from them: ranks
# shared out over several load threads all pass the barrier against mxrun's store alone (a rank
# lost or counted twice would leave the barrier's counter short of the world and the ranks
# unfinished), and ranks that cannot connect are reported as failed, with a non-zero exit.
# Usage: check_store_loadgen.sh STORE_SERVE STORE_LOADGEN
set -u
serve="$1" loadgen="$2"
bad=0
server_pid=""
# The server serves until its standard input closes or it is killed; the trap covers an early exit.
trap '[[ -n "$server_pid" ]] && kill "$server_pid" 2>/dev/null; wait 2>/dev/null' EXIT
start_server() {  # a store of its own for each run: the barrier's keys start from nothing
  coproc SERVER { exec "$serve"; }
  server_pid=$SERVER_PID
  read -r -t 10 word port <&"${SERVER[0]}" || true
  if [[ "${word:-}" != port || ! "${port:-}" =~ ^[0-9]+$ ]]; then
    echo "store_serve did not say its port" >&2
    exit 1
  fi
}
stop_server() {
  kill "$server_pid" && wait "$server_pid" 2>/dev/null
  server_pid=""
}
expect() {  # NAME EXPECTED_RC ARGS...: the load generator's JSON line and exit code
  local name=$1 want_rc=$2 said rc
  shift 2
  said=$("$loadgen" "$@" 2>&1)
  rc=$?
  echo "$name: rc $rc: $said"
  if [[ $rc != "$want_rc" ]]; then echo "$name: exit $rc, expected $want_rc" >&2; bad=1; fi
  printf '%s\n' "$said"
}
for threads in 1 3; do
  start_server
  out=$(expect "1500 ranks on $threads thread(s)" 0 --port "$port" --ranks 1500 --threads "$threads" \
    --connecting 96 --deadline 20 | tail -1)
  if ! grep -q "\"ranks\": 1500, \"threads\": $threads, .*\"failed\": 0, \"unfinished\": 0}" <<< "$out"; then
    echo "1500 ranks on $threads thread(s): not every rank passed the barrier: $out" >&2
    bad=1
  fi
  stop_server
done
# A port nobody listens on: the last server's, now that it is gone.
out=$(expect "no server" 1 --port "$port" --ranks 40 --threads 2 --deadline 20 | tail -1)
if ! grep -q '"failed": 40, "unfinished": 0}' <<< "$out"; then
  echo "no server: the 40 ranks are not all reported as failed: $out" >&2
  bad=1
fi
bad_flag=$("$loadgen" --port "$port" --ranks 4 --threads 5 2>&1)
if [[ $? != 2 || "$bad_flag" != *"--threads must be"* ]]; then
  echo "--threads above --ranks was not refused with exit 2: $bad_flag" >&2
  bad=1
fi
[[ $bad == 0 ]] && echo "store_loadgen: every rank passed the barrier on 1 and 3 threads; refused connections counted as failed"
exit "$bad"
