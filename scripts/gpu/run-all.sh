#!/usr/bin/env bash
# The GPU half of mxrun (issue 28), in one call on a GPU machine:
#
#   scripts/gpu/run-all.sh OUT_DIR
#
# Made for a machine with PyTorch, CUDA's compiler and CMake but none of Debian's packages and no
# network. What it needs from this project's Debian machine travels in two ignored folders:
#   .gpu-bundle/  mxrun, mxrun-multinode, mxrun-master and their libraries
#                 (scripts/gpu/bundle-mxrun.sh)
#   .deps/        the headers the trainer's build needs (CLI11, nlohmann/json, Catch2)
# It builds the trainer there with scripts/gpu/build-trainer-cuda.sh (the script CI runs against
# PyTorch 2.14 CUDA), against that machine's PyTorch, puts it beside the bundle's mxrun, and runs
# the steps below in order. Each step has its own time budget and log (OUT_DIR/<step>.log); a
# failed or timed-out step does not stop the next one. OUT_DIR/summary.md gets one row per step:
# its result, its seconds and its figure.
#
#   preflight      the GPU (nvidia-smi -L, driver), PyTorch, CUDA, NCCL, NVML, the bundle
#   build          the trainer and its tests against this machine's PyTorch (CUDA + NCCL on)
#   trainer-tests  the rest of the trainer's tests (those without a GPU) on this PyTorch; by
#                  default it runs beside the steps after it (BESIDE below)
#   gpu-tests      ctest -L gpu: the trainer's [gpu] tests
#   mxrun-train    mxrun --nproc_per_node=gpu train --model resnet50 --amp bf16 --backend nccl;
#                  the world it made and CUDA_VISIBLE_DEVICES against nvidia-smi -L
#   ddp-nccl       an unmodified PyTorch DDP script (NCCL, DDP(device_ids), GradScaler) under
#                  mxrun and under this machine's torchrun; both workers' environments diffed
#   python-nccl    the mxrun module's NCCL path (scripts/gpu/python_nccl.py): elastic_ddp.py one
#                  worker per GPU under mxrun and torchrun (median step time, parameters equal),
#                  then its last rank SIGKILLed under mxrun (survivors keep their state with 2+
#                  GPUs; with one, the checkpoint)
#   fsdp2-nccl     sharded recovery over NCCL (scripts/gpu/fsdp2_nccl.py): fsdp2.py one worker
#                  per GPU under mxrun and torchrun (shards equal rank by rank), then its last
#                  rank SIGKILLed under mxrun (2+ GPUs: shards back from the peer's host copy,
#                  0 steps redone, bitwise; with one GPU, skipped)
#   numa           --numa-binding=node --virtual-local-rank: each worker's CPUs and devices
#                  under both launchers
#   bench-r18      scripts/bench/train.sh, ResNet-18 (CIFAR) batch 128, bf16, channels-last,
#                  BENCH_RUNS runs per side (default 5: the spread needs them)
#   bench-r50      the same, ResNet-50 batch 256
#   recovery       scripts/bench/recovery.sh on the GPU: launch and SIGKILL to the first step,
#                  RECOVERY_RUNS runs per case (default 2); OLD_WAY=1 adds mxrun's restart of
#                  every worker from the checkpoint (off by default: the device time is short)
#   launch         scripts/bench/launch.sh: launch-to-exit, RSS and restart against torchrun
#
# Not in the default list (STEPS names it):
#   store-scale    scripts/bench/store_scale.sh at 4,096 and 16,384 simulated ranks (issue 57): the
#                  bundle's store_serve against this machine's PyTorch TCPStore server, each
#                  pinned to CPU 0, the load generator on the other CPUs with a thread for every
#                  two of them: on one machine of many cores the nearest to ranks on other hosts
#                  (on 2 cores the load generator's own share of the connections is the bound).
#                  PyTorch's server looks up each peer's name: it runs where a mount namespace can
#                  hide the resolver (root, unshare), else mxrun's store runs alone
#
# Environment:
#   STEPS         which steps, comma-separated, run in the order given (default: all, as listed)
#   BESIDE        steps that run in the background beside the steps after them (default
#                 trainer-tests: CPU work that disturbs no check); a step that measures time
#                 (recovery, launch, bench-*) first waits for them, so its figures are taken on
#                 an otherwise idle machine
#   TOTAL_BUDGET  seconds for the whole run (default 540); a step that would not fit in what is
#                 left is skipped and says so
#   PYTHON        the Python with PyTorch (default python3); its torchrun is the reference
#   BUILD_DIR     the trainer's build (default build-cuda; kept between calls on a warm machine)
#   BUNDLE        the carried mxrun (default .gpu-bundle)
# Without a GPU (nvidia-smi lists none) the steps that need one say so and are skipped: the
# script still exits 0, so it can be tried on any machine. Exit 2 for a bad argument.
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
[[ $# -eq 1 && -n "$1" ]] || { echo "usage: scripts/gpu/run-all.sh OUT_DIR" >&2; exit 2; }
mkdir -p "$1" || exit 2
out=$(cd "$1" && pwd)
all_steps="preflight,build,trainer-tests,gpu-tests,mxrun-train,ddp-nccl,python-nccl,fsdp2-nccl,numa,bench-r18,bench-r50,recovery,launch"
optional_steps="store-scale"
steps="${STEPS:-$all_steps}"
total="${TOTAL_BUDGET:-540}"
[[ "$total" =~ ^[1-9][0-9]*$ ]] || { echo "run-all: TOTAL_BUDGET must be a whole number of seconds, not '$total'" >&2; exit 2; }
beside="${BESIDE-trainer-tests}"
for s in ${steps//,/ } ${beside//,/ }; do
  [[ ",$all_steps,$optional_steps," == *",$s,"* ]] || { echo "run-all: unknown step '$s' (accepted: $all_steps,$optional_steps)" >&2; exit 2; }
done
export ROOT="$root" OUT="$out"
PY=$(command -v "${PYTHON:-python3}" || echo "${PYTHON:-python3}")
# Absolute, without resolving links (a virtual environment's python3 is a link to the system's).
[[ "$PY" == */* ]] && PY="$(cd "$(dirname "$PY")" && pwd)/$(basename "$PY")"
export PY
export BUILD_CUDA="${BUILD_DIR:-$root/build-cuda}"
export BUNDLE="${BUNDLE:-$root/.gpu-bundle}"
export MXRUN="$BUNDLE/bin/mxrun"
export PYTHONUNBUFFERED=1
started=$SECONDS

# --- What this machine has -----------------------------------------------------------------
have_gpu=0
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then have_gpu=1; fi
export N_GPUS=$((have_gpu ? $(nvidia-smi -L | grep -c '^GPU ') : 0))
torchrun_bin=$(dirname "$PY")/torchrun
[[ -x "$torchrun_bin" ]] || torchrun_bin=$(command -v torchrun || true)
export TORCHRUN="$torchrun_bin"
# mxrun runs a script with $PYTHON_EXEC (torchrun: its own interpreter): the same Python for both.
export PYTHON_EXEC="$PY"
# mxrun loads NVML by name (libnvidia-ml.so.1); where the driver's folder is not in the loader's
# cache, name it (the driver's libraries, nothing of the bundle's, so workers may see it too).
if [[ $have_gpu == 1 ]] && ! ldconfig -p 2>/dev/null | grep -q 'libnvidia-ml.so.1'; then
  nvml=$(find /usr/local/nvidia /usr/lib /usr/lib64 /usr/local/cuda* -name 'libnvidia-ml.so.1' 2>/dev/null | head -1)
  [[ -n "$nvml" ]] && export LD_LIBRARY_PATH="$(dirname "$nvml")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
# The trainer beside mxrun, as mxrun expects it (train.sh copies both).
[[ -x "$MXRUN" ]] && ln -sfn "$BUILD_CUDA/bin/train" "$BUNDLE/bin/train" 2>/dev/null

missing() {  # prints why a step cannot run, or nothing
  for need in "$@"; do
    case "$need" in
      gpu) [[ $have_gpu == 1 ]] || { echo "no GPU here (nvidia-smi lists none)"; return; } ;;
      mxrun) "$MXRUN" --version >/dev/null 2>&1 || { echo "the carried mxrun does not run ($MXRUN; scripts/gpu/bundle-mxrun.sh makes it)"; return; } ;;
      trainer) [[ -x "$BUILD_CUDA/bin/train" ]] || { echo "the trainer is not built ($BUILD_CUDA/bin/train)"; return; } ;;
      torchrun) [[ -x "$TORCHRUN" ]] || { echo "no torchrun beside $PY"; return; } ;;
      nvcc) command -v nvcc >/dev/null 2>&1 || [[ -x /usr/local/cuda/bin/nvcc ]] || { echo "no nvcc"; return; } ;;
      tests) [[ -f "$BUILD_CUDA/CTestTestfile.cmake" ]] || { echo "no tests built in $BUILD_CUDA"; return; } ;;
      store) [[ -x "$BUNDLE/bin/store_serve" && -x "$BUNDLE/bin/store_loadgen" ]] || { echo "the bundle has no store_serve and store_loadgen (scripts/gpu/bundle-mxrun.sh adds them)"; return; } ;;
    esac
  done
}

marked_pids() {  # the processes a step started: they carry GPU_RUN_ALL_STEP=<its marker>
  grep -lzx "GPU_RUN_ALL_STEP=$1" /proc/[0-9]*/environ 2>/dev/null | cut -d/ -f3
}

kill_marked() {  # what the step left running
  local pid
  for pid in $(marked_pids "$1"); do
    [[ "$pid" != $$ ]] && kill -9 "$pid" 2>/dev/null
  done
}

# --- The steps: each writes its figure (one line) to $OUT/<step>.figure ------------------------
figure() { echo "$*" >"$OUT/$STEP.figure"; }

step_preflight() {
  date -u '+date: %Y-%m-%d %H:%M:%S UTC'
  nvidia-smi -L || true
  nvidia-smi --query-gpu=name,driver_version,memory.total,pci.bus_id --format=csv || true
  nvidia-smi topo -m 2>/dev/null || true
  "$PY" - <<'PY' || true
import torch
print("torch", torch.__version__, "cuda", torch.version.cuda, "available", torch.cuda.is_available())
if torch.cuda.is_available():
    print("device", torch.cuda.get_device_name(0), "capability", torch.cuda.get_device_capability(0),
          "nccl", torch.cuda.nccl.version(), "cudnn", torch.backends.cudnn.version())
PY
  (nvcc --version || /usr/local/cuda/bin/nvcc --version) 2>/dev/null | tail -2
  cmake --version | head -1; ninja --version 2>/dev/null || true
  echo "nproc $(nproc)"; free -g | head -2; lscpu | grep -E 'Model name|NUMA' || true
  ldconfig -p | grep -E 'libnvidia-ml.so.1|libcuda.so.1' || echo "NVML/libcuda not in the loader's cache; LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}"
  echo "torchrun: $TORCHRUN"; "$TORCHRUN" --help 2>&1 | grep -E -- '--numa.binding|--virtual.local.rank' || true
  echo "bundle: $(cat "$BUNDLE/COMMIT" 2>/dev/null)"; "$MXRUN" --version
  local gpu driver torch_v
  gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
  driver=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -1)
  torch_v=$("$PY" -c 'import torch; print(torch.__version__)' 2>/dev/null)
  figure "${N_GPUS}x ${gpu:-no GPU}, driver ${driver:-none}; torch ${torch_v:-missing}; mxrun $("$MXRUN" --version 2>/dev/null | head -1)"
}

step_build() {
  local t0=$SECONDS
  CUDA_ARCH="${CUDA_ARCH:-90}" PYTHON="$PY" "$ROOT/scripts/gpu/build-trainer-cuda.sh" "$BUILD_CUDA" || return 1
  "$BUILD_CUDA/bin/train" --version
  ldd "$BUILD_CUDA/bin/train" | grep -E 'torch|c10|nccl|cuda|not found'
  ! ldd "$BUILD_CUDA/bin/train" | grep -q 'not found' || return 1
  figure "built in $((SECONDS - t0)) s: $("$BUILD_CUDA/bin/train" --version 2>&1 | head -1)"
}

ctest_figure() {  # "N of M passed", and the failures
  local line
  # ctest says "100% tests passed out of 2" or "50% tests passed, 1 tests failed out of 2".
  line=$(grep -E '% tests passed(, [0-9]+ tests failed)? out of [0-9]+' "$1" | tail -1)
  local failures
  failures=$(sed -n '/The following tests FAILED/,$p' "$1" | grep -E '^\s+[0-9]+ - ' |
             sed -E 's/^\s+[0-9]+ - //' | tr '\n' ';')
  figure "${line:-no ctest summary}${failures:+; failed: $failures}"
}

step_gpu_tests() {
  ctest --test-dir "$BUILD_CUDA" -L gpu --output-on-failure --timeout 150 2>&1 | tee "$OUT/gpu-tests.ctest"
  local rc=${PIPESTATUS[0]}
  ctest_figure "$OUT/gpu-tests.ctest"
  return "$rc"
}

step_trainer_tests() {
  ctest --test-dir "$BUILD_CUDA" -LE gpu -j 8 --output-on-failure --timeout 300 2>&1 | tee "$OUT/trainer-tests.ctest"
  local rc=${PIPESTATUS[0]}
  ctest_figure "$OUT/trainer-tests.ctest"
  return "$rc"
}

step_mxrun_train() {
  local work=$OUT/mxrun-train.d
  mkdir -p "$work"
  # What mxrun gives each worker, against what the driver lists.
  nvidia-smi -L
  "$MXRUN" --nproc_per_node=gpu --no_python sh -c \
    'echo "worker RANK=$RANK LOCAL_RANK=$LOCAL_RANK LOCAL_WORLD_SIZE=$LOCAL_WORLD_SIZE WORLD_SIZE=$WORLD_SIZE CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES-unset}"' \
    2>&1 | tee "$work/placement.txt" || return 1
  local workers
  workers=$(grep -c 'worker RANK=' "$work/placement.txt")
  "$MXRUN" --nproc_per_node=gpu train --model resnet50 --amp bf16 --backend nccl --device cuda \
    --channels_last --batch_size 128 --synthetic_train 16384 --max_steps 60 --log_every 10 \
    --no_eval --ckpt_dir '' --metrics_file "$work/metrics.jsonl" || return 1
  local rate
  rate=$("$PY" - "$work/metrics.jsonl" <<'PY'
import json, statistics, sys
rates = [r["images_per_sec"] for r in map(json.loads, open(sys.argv[1])) if r.get("event") == "step"]
print(f"{statistics.median(rates[1:] or rates):.0f}" if rates else "none")
PY
)
  figure "nvidia-smi: $N_GPUS GPU(s); mxrun started $workers worker(s) ($(grep -o 'CUDA_VISIBLE_DEVICES=[^ ]*' "$work/placement.txt" | sort -u | tr '\n' ' ')); resnet50 bf16 batch 128 trained: $rate images/s (median of windows)"
  [[ "$workers" == "$N_GPUS" ]]
}

run_bounded() {  # NAME CMD...: at most $LAUNCH_WAIT s (default 40); when it hangs, what its processes wait on
  local name=$1; shift
  echo "== $name: $*"
  "$@" &
  local pid=$! waited=0
  while kill -0 "$pid" 2>/dev/null && ((waited < ${LAUNCH_WAIT:-40})); do sleep 1; waited=$((waited + 1)); done
  if ! kill -0 "$pid" 2>/dev/null; then
    wait "$pid"
    return
  fi
  echo "== $name: still running after $waited s; its processes and their threads' wait channels:"
  ps -eo pid,ppid,pgid,stat,wchan:30,etime,args --forest | grep -v -- '--forest' | cut -c1-220
  local p t
  for p in $(marked_pids "$GPU_RUN_ALL_STEP"); do
    [[ "$p" == "$$" || "$p" == "$BASHPID" || ! -d /proc/$p ]] && continue  # gone: this very search
    echo "-- pid $p: $(tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | cut -c1-150)"
    for t in /proc/"$p"/task/*; do
      echo "   $(basename "$t") $(cat "$t/comm" 2>/dev/null) $(cat "$t/wchan" 2>/dev/null) $(cut -d' ' -f3 "$t/stat" 2>/dev/null)"
    done | sort -k3 | uniq -c -f2 | head -20
    cat "/proc/$p/stack" 2>/dev/null | head -8
  done
  kill -TERM "$pid" 2>/dev/null; sleep 3; kill -KILL "$pid" 2>/dev/null
  return 124
}

run_both() {  # TAG_SUFFIX LAUNCHER_ARGS...: the DDP script under torchrun, then mxrun
  local suffix=$1; shift
  local rc=0
  run_bounded torchrun "$TORCHRUN" "$@" "$ROOT/scripts/gpu/ddp_nccl_amp.py" "$DUMP" "torchrun$suffix" $EXTRA || rc=1
  run_bounded mxrun "$MXRUN" "$@" "$ROOT/scripts/gpu/ddp_nccl_amp.py" "$DUMP" "mxrun$suffix" $EXTRA || rc=1
  return $rc
}

diff_figure() {  # counts the differences env_diff.py listed
  local only_t only_m changed
  only_t=$(grep -c '^- set by torchrun[-a-z]* only: `' "$1")
  only_m=$(grep -c '^- set by mxrun[-a-z]* only: `' "$1")
  changed=$(grep -c '^- set differently: `' "$1")
  echo "ranks with variables only torchrun set: $only_t, only mxrun set: $only_m, set differently: $changed"
}

step_ddp_nccl() {
  export DUMP=$OUT/env EXTRA=""
  mkdir -p "$DUMP"
  local rc=0
  run_both "" --nproc_per_node=gpu || rc=1
  # The diff even when a launcher did not end: each worker wrote its dump before its last steps.
  "$PY" "$ROOT/scripts/gpu/env_diff.py" "$DUMP" torchrun mxrun | tee "$OUT/env-diff.md" || return 1
  figure "the DDP NCCL + GradScaler script under both launchers: $([[ $rc == 0 ]] && echo "both ended 0" || echo "one did not end 0"), world $N_GPUS; $(diff_figure "$OUT/env-diff.md")"
  return $rc
}

step_python_nccl() {
  "$PY" "$ROOT/scripts/gpu/python_nccl.py" | tee "$OUT/python-nccl.md"
  local rc=${PIPESTATUS[0]}
  figure "$(tail -1 "$OUT/python-nccl.md")"
  return "$rc"
}

step_fsdp2_nccl() {
  "$PY" "$ROOT/scripts/gpu/fsdp2_nccl.py" | tee "$OUT/fsdp2-nccl.md"
  local rc=${PIPESTATUS[0]}
  figure "$(tail -1 "$OUT/fsdp2-nccl.md")"
  return "$rc"
}

step_numa() {
  export DUMP=$OUT/env EXTRA="--env_only"
  mkdir -p "$DUMP"
  run_both "-numa" --nproc_per_node=gpu --numa-binding=node --virtual-local-rank || return 1
  "$PY" "$ROOT/scripts/gpu/env_diff.py" "$DUMP" torchrun-numa mxrun-numa | tee "$OUT/numa-diff.md" || return 1
  figure "$(grep -E '^- (CPUs|CUDA_VISIBLE_DEVICES|LOCAL_RANK):' "$OUT/numa-diff.md" | tr '\n' ' ')"
}

bench_train() {  # MODEL BATCH
  MODEL=$1 BATCH=$2 DEVICE=cuda AMP=bf16 RUNS="${STEP_RUNS:-${BENCH_RUNS:-5}}" STEPS=60 LOG_EVERY=10 N=16384 \
    QUIET_WAIT=0 TIMEOUT=120 TORCHRUN="$TORCHRUN" PYTHON="$PY" \
    "$ROOT/scripts/bench/train.sh" | tee "$OUT/$STEP.md"
  local rc=${PIPESTATUS[0]}
  figure "${STEP_RUNS:-${BENCH_RUNS:-5}} runs per side: $(grep -E '^\| (training throughput|peak GPU memory)' "$OUT/$STEP.md" | tr -s ' ' | tr '\n' ' ')"
  return "$rc"
}
step_bench_r18() { bench_train resnet18 128; }
step_bench_r50() { bench_train resnet50 256; }

step_recovery() {
  DEVICE=cuda NPROC="$N_GPUS" RUNS="${RECOVERY_RUNS:-2}" OLD_WAY="${OLD_WAY:-0}" WAIT=60 N=50000 TORCHRUN="$TORCHRUN" \
    PYTHON="$PY" "$ROOT/scripts/bench/recovery.sh" | tee "$OUT/recovery.md"
  local rc=${PIPESTATUS[0]}
  figure "$(grep -E '^\| (mxrun|torchrun)|^(Recovery|Cold start):|^Where ' "$OUT/recovery.md" | tr -s ' ' | tr '\n' ' ')"
  return "$rc"
}

step_launch() {
  CASES=launch,rss,restart RUNS="${LAUNCH_RUNS:-3}" QUIET_WAIT=0 TORCHRUN="$TORCHRUN" \
    PYTHON="$PY" "$ROOT/scripts/bench/launch.sh" | tee "$OUT/launch.md"
  local rc=${PIPESTATUS[0]}
  figure "$(grep -E '^\|' "$OUT/launch.md" | grep -vE '^\|[-|: ]+\|$' | head -8 | tr -s ' ' | tr '\n' ' ')"
  return "$rc"
}

step_store_scale() {
  local servers=mxrun,pytorch cpus threads
  cpus=$(nproc)
  threads=$(((cpus - 1) / 2 > 1 ? (cpus - 1) / 2 : 1))
  if ! unshare -m --propagation private true 2>/dev/null; then
    servers=mxrun
    echo "store-scale: no mount namespace here (root and unshare): PyTorch's server, whose peer-name lookups would wait on a resolver this machine cannot reach, is left out"
  fi
  PIN=1 LOAD_THREADS="$threads" SERVERS="$servers" RUNS="${STORE_RUNS:-3}" RANKS=4096,16384 \
    MXRUN_BUILD="$BUNDLE" PYTHON="$PY" "$ROOT/scripts/bench/store_scale.sh" | tee "$OUT/store-scale.md"
  local rc=${PIPESTATUS[0]}
  # "16,384 ranks, barrier (server CPU): mxrun 1.094 s (1.074-1.117) (0.91 s (0.10 s)); pytorch
  # 1.101 s (...) (1.01 s (0.14 s)) 1.0x, 1.1x, 1.4x;"
  figure "16,384 ranks, barrier (server CPU):$(awk -F' *[|] *' '$2 == "16384" {
    printf " %s %s (%s)%s;", $3, $4, $7, ($9 == "" ? "" : " " $9) }' "$OUT/store-scale.md")"
  return "$rc"
}

needs_of() {
  case "$1" in
    preflight) echo "" ;;
    build) echo "nvcc" ;;
    gpu-tests) echo "gpu trainer tests torchrun" ;;
    mxrun-train) echo "gpu mxrun trainer" ;;
    ddp-nccl|python-nccl|fsdp2-nccl|numa) echo "gpu mxrun torchrun" ;;
    bench-r18|bench-r50|recovery) echo "gpu mxrun trainer torchrun" ;;
    launch) echo "mxrun torchrun" ;;
    trainer-tests) echo "trainer tests torchrun" ;;
    store-scale) echo "store" ;;
  esac
}
pair_seconds_of() {  # one pair of benchmark runs, mxrun and the reference: the slower of an
  # H200's (2026-11-26) and an H100's (2026-11-27: 4.5 ResNet-18 pairs took 170 s; ResNet-50's
  # runs 14.9 + 29.4 s), with the time between runs, rounded up
  case "$1" in bench-r18) echo 38 ;; bench-r50) echo 48 ;; esac
}
budget_of() {
  case "$1" in
    preflight) echo 40 ;; build) echo 300 ;; gpu-tests) echo 150 ;; mxrun-train) echo 90 ;;
    ddp-nccl) echo 100 ;; python-nccl) echo 150 ;; numa) echo 60 ;;
    # Not yet measured on a GPU: 3 runs of fsdp2.py, each mostly the start (~15 s on 2 CPUs).
    fsdp2-nccl) echo 150 ;;
    # Measured on an H200 (2026-11-26) and an H100 (2026-11-27): a recovery step of 2 runs per
    # case took 124 s, the launch step 145 s (a torchrun launch there takes 4 s).
    bench-r18|bench-r50) echo $(($(pair_seconds_of "$1") * ${BENCH_RUNS:-5} + 20)) ;;
    recovery) echo 220 ;; launch) echo 150 ;; trainer-tests) echo 240 ;;
    # Not yet measured there; on 2 cores its 3 runs at 4,096 and 16,384 ranks per server took
    # 20 s, PyTorch's server importing torch each run.
    store-scale) echo 120 ;;
  esac
}
export -f figure marked_pids ctest_figure run_bounded run_both diff_figure bench_train
for s in ${all_steps//,/ } ${optional_steps//,/ }; do export -f "step_${s//-/_}"; done

summary="$out/summary.md"
{
  echo "# scripts/gpu/run-all.sh, $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
  echo
  echo "- host: $(hostname), $(nproc) CPUs; GPUs: $N_GPUS; python: $PY; torchrun: ${TORCHRUN:-none}"
  echo "- commit: $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown); bundle: $(cat "$BUNDLE/COMMIT" 2>/dev/null | cut -c1-7)"
  echo "- steps: $steps; total budget $total s"
  echo
  echo "| step | result | seconds | figure |"
  echo "|---|---|---:|---|"
} >"$summary"
measures_time() {  # a step whose figures a busy machine would distort
  case "$1" in recovery|launch|bench-r18|bench-r50|store-scale) return 0 ;; esac
  return 1
}
# A benchmark cut short prints no table: it runs with fewer runs per side that fit in what is
# left (at least 3, and the summary says so), or not at all.
is_bench() { [[ "$1" == bench-* ]]; }

run_step() {  # STEP BUDGET: runs it, bounded, and writes its summary row
  local STEP=$1 budget=$2 log="$out/$1.log" t0=$SECONDS rc result fig took
  export STEP
  echo "run-all: $STEP (budget $budget s)..."
  # Every process the step starts carries GPU_RUN_ALL_STEP: what it leaves behind (torchrun starts
  # workers in sessions of their own, outside timeout's process group) is found and killed.
  GPU_RUN_ALL_STEP="$out/$STEP" timeout --kill-after=5 "$budget" bash -c "step_${STEP//-/_}" >"$log" 2>&1
  rc=$?
  kill_marked "$out/$STEP"
  took=$((SECONDS - t0))
  case $rc in
    0) result=ok ;;
    124|137) result="timed out after $budget s" ;;
    *) result="failed (exit $rc)" ;;
  esac
  fig=$(cat "$out/$STEP.figure" 2>/dev/null | tr '|' '/')
  [[ $rc != 0 ]] && fig="${fig:+$fig; }log: $(tail -3 "$log" | tr -s ' \n' ' ' | tr '|' '/' | cut -c1-300)"
  echo "| $STEP | $result | $took | $fig |" >>"$summary"
  echo "run-all: $STEP: $result in $took s"
}

beside_pids=()
wait_beside() {  # the background steps, before a step that measures time and at the end
  ((${#beside_pids[@]})) || return 0
  echo "run-all: waiting for the steps running beside (${beside_pids[*]})..."
  wait "${beside_pids[@]}"
  beside_pids=()
}

for STEP in ${steps//,/ }; do
  rm -f "$out/$STEP.figure"
  measures_time "$STEP" && wait_beside
  # shellcheck disable=SC2046
  why=$(missing $(needs_of "$STEP"))
  budget=$(budget_of "$STEP")
  left=$((total - (SECONDS - started)))
  least=$((budget / 2))
  unset STEP_RUNS
  if is_bench "$STEP" && ((left < budget)); then
    export STEP_RUNS=$(((left - 20) / $(pair_seconds_of "$STEP")))
    least=$((3 * $(pair_seconds_of "$STEP") + 20))
  fi
  if [[ -z "$why" && $left -lt $least ]]; then
    why="out of time ($left s left of $total, the step needs $least of its $budget s)"
  fi
  ((budget > left)) && budget=$left
  if [[ -n "$why" ]]; then
    echo "run-all: $STEP: skipped: $why" | tee "$out/$STEP.log"
    echo "| $STEP | skipped: $why | 0 | |" >>"$summary"
    continue
  fi
  if [[ ",$beside," == *",$STEP,"* ]]; then
    run_step "$STEP" "$budget" &
    beside_pids+=($!)
  else
    run_step "$STEP" "$budget"
  fi
done
wait_beside
failed=$(grep -cE '^\| [a-z0-9-]+ \| (timed out|failed)' "$summary")
echo >>"$summary"
echo "$failed step(s) failed; $((SECONDS - started)) s in all" >>"$summary"
cat "$summary"
exit 0
