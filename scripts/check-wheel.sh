#!/usr/bin/env bash
# mxrun's wheel, tested as a user installs it (scripts/test.sh runs this in CI, issue 36):
#
#   scripts/check-wheel.sh
#
# 1. builds the wheel (scripts/build-wheel.sh) and installs it into a fresh virtual environment
#    that holds only PyTorch 2.13 (CPU) and the wheel, timing both installs;
# 2. hides, for the rest, every copy of the libraries the wheel vendors from this machine (a mount
#    namespace binds /dev/null over each: the build's -dev packages are out of sight), and checks
#    with ldd that the installed programs resolve nothing outside the environment but glibc and the
#    C++ runtime;
# 3. runs, from the environment alone (its bin/ first on PATH, no PYTHONPATH): a one-node PyTorch
#    DDP job; `python -m mxrun` with a script that reports progress through the installed `mxrun`
#    module; a two-node job on loopback through the installed mxrun-master with a token, and
#    `mxrun status` against it while it runs.
# Everything binds 127.0.0.1 on ports the kernel picks; every process is bounded by `timeout` and
# stopped by pid. Prints "check-wheel: N passed, N failed".
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

passed=0
failed=0
ok() { echo "check-wheel: ok: $*"; passed=$((passed + 1)); }
bad() { echo "check-wheel: FAILED: $*"; failed=$((failed + 1)); }

work=$(mktemp -d "${TMPDIR:-/tmp}/mxrun-check-wheel.XXXXXX")
trap 'rm -rf -- "$work"' EXIT

# 1. Build and install.
if ! "$root/scripts/build-wheel.sh" "$work/dist" >"$work/build.log" 2>&1; then
  tail -30 "$work/build.log"
  echo "check-wheel: scripts/build-wheel.sh failed"
  exit 1
fi
wheel=$(ls "$work"/dist/mxrun-*.whl)
ok "$(tail -1 "$work/build.log")"
/usr/bin/python3 -m venv "$work/venv"
torch_pin=$(grep -oE '^  torch==[0-9.]+' "$root/scripts/python-env.sh" | head -1 | tr -d ' ')
t0=$(date +%s%N)
"$work/venv/bin/python3" -m pip install -q --disable-pip-version-check "$torch_pin" >"$work/pip-torch.log" 2>&1 ||
  { tail -20 "$work/pip-torch.log"; echo "check-wheel: pip install $torch_pin failed"; exit 1; }
t1=$(date +%s%N)
"$work/venv/bin/python3" -m pip install -q --disable-pip-version-check "$wheel" >"$work/pip-wheel.log" 2>&1 ||
  { tail -20 "$work/pip-wheel.log"; echo "check-wheel: pip install of the wheel failed"; exit 1; }
t2=$(date +%s%N)
ok "installed into a fresh venv: $torch_pin in $(((t1 - t0) / 1000000)) ms, the wheel ($(du -h "$wheel" | cut -f1)) in $(((t2 - t1) / 1000000)) ms"

# 2 and 3 run in a mount namespace where this machine's copies of the vendored libraries are gone.
cat >"$work/inside.sh" <<'INSIDE'
set -uo pipefail
venv=$1 root=$2 work=$3
# Hidden: every vendored library but those Python and PyTorch themselves load from the system
# (zlib, OpenSSL, ...: base libraries every machine with Python has, not the build's).
needed=$(for f in "$(readlink -f "$venv/bin/python3")" /usr/lib/python3*/lib-dynload/*.so \
                  "$venv"/lib/python3*/site-packages/torch/lib/*.so* \
                  "$venv"/lib/python3*/site-packages/torch/_C*.so; do
           ldd "$f" 2>/dev/null | awk '$2 == "=>" {print $1}'
         done | sort -u)
kept=()
for lib in "$venv"/lib/mxrun/*; do
  name=$(basename "$lib")
  if grep -qxF "$name" <<<"$needed"; then kept+=("$name"); continue; fi
  for copy in /usr/lib/x86_64-linux-gnu/"$name" /usr/lib/"$name" /usr/local/lib/"$name"; do
    [[ -e "$copy" ]] && mount --bind /dev/null "$(readlink -f "$copy")"
  done
done
export PATH="$venv/bin:/usr/bin:/bin" PYTHONPATH= PYTHON_EXEC=
unset PYTHONPATH PYTHON_EXEC VIRTUAL_ENV
say() { echo "$1: $2"; }

# The hiding works: the build's own mxrun, which loads them from this machine, no longer starts.
if "$root/build/bin/mxrun" --version >/dev/null 2>&1; then
  say bad "the machine's copies of the vendored libraries are still loadable (build/bin/mxrun starts)"
else
  say ok "this machine's copies of $(( $(ls "$venv"/lib/mxrun | wc -l) - ${#kept[@]} )) of the $(ls "$venv"/lib/mxrun | wc -l) vendored libraries are hidden (build/bin/mxrun no longer starts); kept, since Python or PyTorch load them: ${kept[*]:-none}"
fi

# What the programs load.
for program in mxrun mxrun-multinode mxrun-master; do
  outside=$(ldd "$venv/bin/$program" | awk '$2 == "=>" {print $3} $2 ~ /not/ {print "missing:" $1}' |
            while read -r p; do readlink -f "$p" 2>/dev/null || echo "$p"; done |
            grep -vE "^$(readlink -f "$venv")/lib/mxrun/|/(libc|libm|libdl|libpthread|librt|libstdc\+\+|libgcc_s)\.so" || true)
  if [[ -z "$outside" ]]; then say ok "$program loads only the wheel's libraries, glibc and the C++ runtime"
  else say bad "$program loads from outside the wheel: $(echo $outside)"; fi
done

# A one-node PyTorch DDP job. The script never imports mxrun: its optimizer's steps are reported
# through the wheel's mxrun-auto-progress.pth, unless MXRUN_AUTO_PROGRESS=0.
if out=$(timeout 120 mxrun --standalone --nproc_per_node=2 "$root/scripts/examples/ddp_allreduce.py" 2>&1); then
  say ok "one-node PyTorch DDP job (mxrun --standalone --nproc_per_node=2 ddp_allreduce.py): exit 0"
  if [[ "$out" == *"goodput "* && "$out" != *"no progress reports"* ]]; then
    say ok "a script that never imports mxrun reports its optimizer's steps (mxrun-auto-progress.pth)"
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

# Lightning's callback registry finds mxrun's progress callback through the wheel's entry points
# (tests/integration/frameworks_test.cc runs a Lightning job with them).
if out=$(python -c 'from importlib.metadata import entry_points as e
print(sorted(p.value for g in ("lightning.pytorch.callbacks_factory", "pytorch_lightning.callbacks_factory") for p in e(group=g)))' 2>&1) &&
   [[ "$out" == "['mxrun._framework_progress:lightning_callbacks', 'mxrun._framework_progress:pytorch_lightning_callbacks']" ]]; then
  say ok "the wheel's entry points give Lightning mxrun's progress callback"
else
  say bad "the wheel's Lightning entry points: $out"
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
timeout 120 mxrun-master --host=127.0.0.1 --port=0 --token_file="$token" >"$work/master.out" 2>&1 &
master=$!
endpoint=""
for _ in $(seq 100); do
  endpoint=$(grep -oE 'listening on [0-9.]+:[0-9]+' "$work/master.out" | head -1 | awk '{print $3}')
  [[ -n "$endpoint" ]] && break
  sleep 0.1
done
if [[ -z "$endpoint" ]]; then
  say bad "mxrun-master did not say where it listens: $(cat "$work/master.out")"
else
  agents=()
  for node in 0 1; do
    timeout 120 mxrun --rdzv_backend=c10d --rdzv_endpoint="$endpoint" --rdzv_id=wheel-check \
      --nnodes=2 --nproc_per_node=1 --rdzv_conf="token_file=$token" \
      "$root/scripts/examples/ddp_allreduce.py" --hold-if-world 2 --hold-seconds 4 \
      >"$work/node$node.out" 2>&1 &
    agents+=($!)
  done
  status=""
  started=$SECONDS
  while ((SECONDS - started < 30)); do
    status=$(timeout 10 mxrun status --timeout=2 --rdzv_endpoint="$endpoint" --rdzv_conf="token_file=$token" 2>&1 || true)
    [[ "$status" == *wheel-check* && "$status" == *running* ]] && break
    sleep 0.1
  done
  rcs=""
  for pid in "${agents[@]}"; do wait "$pid"; rcs+="$? "; done
  if [[ "$rcs" == "0 0 " ]]; then say ok "two-node job on loopback with a token through the wheel's mxrun-master: both nodes exit 0"
  else say bad "two-node job: exits $rcs: $(tail -5 "$work/node0.out" "$work/node1.out")"; fi
  if [[ "$status" == *wheel-check* && "$status" == *running* ]]; then say ok "mxrun status lists the running two-node job"
  else say bad "mxrun status: $(echo "$status" | head -10)"; fi
  refused=$(timeout 10 mxrun status --timeout=2 --rdzv_endpoint="$endpoint" 2>&1 || true)
  if [[ "$refused" != *wheel-check* ]]; then say ok "mxrun status without the token is refused"
  else say bad "mxrun status without the token listed the job"; fi
fi
[[ -n "${master:-}" ]] && kill "$master" 2>/dev/null
wait 2>/dev/null
INSIDE
while IFS= read -r line; do
  case "$line" in
    ok:*) ok "${line#ok: }" ;;
    bad:*) bad "${line#bad: }" ;;
  esac
done < <(unshare --mount --propagation private bash "$work/inside.sh" "$work/venv" "$root" "$work" 2>&1)

echo "check-wheel: $passed passed, $failed failed"
[[ $failed == 0 ]]
