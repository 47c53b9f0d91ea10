#!/usr/bin/env bash
# Training-throughput benchmark: mxrun's bundled trainer against the PyTorch 2.13 DDP reference
# (scripts/bench/reference/ddp_resnet.py under torchrun 2.13 from the project's venv), side by side.
#
# Both train the same ResNet (torchvision layout, CIFAR stem) on synthetic CIFAR-shaped data
# held in memory, with random crop + flip + normalisation, DistributedSampler sharding, SGD
# (lr 0.1, momentum 0.9, weight decay 1e-4) and DDP-style gradient all-reduce (25 MiB buckets).
# One difference is DDP's and kept: DDP broadcasts BatchNorm buffers from rank 0 before every
# forward (broadcast_buffers=True, its default), the trainer only before evaluation (in training
# BatchNorm normalises with batch statistics, so the running ones are not read there). With one
# worker, as on CUDA by default, DDP still issues its broadcast (among one rank); the trainer none.
#
#   mxrun:     $MXRUN --standalone --nproc_per_node=$NPROC train --model $MODEL --width $WIDTH
#                --batch_size $BATCH --max_steps $STEPS --log_every $LOG_EVERY
#                --synthetic_train $N --no_eval --ckpt_dir '' --metrics_file RUN/m.jsonl
#   reference: $TORCHRUN --standalone --nproc_per_node=$NPROC
#                scripts/bench/reference/ddp_resnet.py (same flags, minus --no_eval, --ckpt_dir
#                and --metrics_file; on CUDA plus --cudnn_benchmark, which the trainer does by
#                default there, and at width 64 --torchvision: torchvision's ResNet with a CIFAR
#                stem where torchvision is installed; the project's venv has no torchvision, so
#                there the reference uses its own ResNet of the same layout, as on CPU)
#
# Every LOG_EVERY steps each side records images/s = global images of the window (batch x
# world size x steps) over the window's wall time: the trainer in its --metrics_file, the
# reference as JSON lines on rank 0's stdout. Per run the first window (warm-up) is dropped
# and the median of the others kept; the report gives, per launcher, the median over runs and
# the ratio mxrun/reference (above 1: mxrun's trainer is faster). The two alternate run by run
# (the one going first alternates too), so both see the same background load.
#
# Prints a Markdown report on stdout; progress on stderr.
#
# Environment:
#   RUNS       runs per launcher (default 3)
#   MODEL      resnet18 | resnet34 | resnet50 | resnet101 | resnet152 (default resnet18)
#   WIDTH      channels of the first stage (default 64, as torchvision)
#   BATCH      images per worker per step (default 32)
#   STEPS      optimizer steps per run (default 40); needs at least 2 windows
#   LOG_EVERY  steps per throughput window (default 5)
#   N          synthetic training images (default 4096)
#   DEVICE     cpu (default) or cuda; cuda passes --device cuda --backend nccl --amp $AMP
#              --channels_last to both sides, and reports each side's peak GPU memory
#   AMP        off | bf16 | fp16, with DEVICE=cuda only (default bf16 on cuda)
#   NPROC      workers (default 2 on cpu, 1 on cuda)
#   TIMEOUT    seconds one run may take before it is killed (default 1800)
#   QUIET_WAIT before each pair of runs, wait at most this many seconds for the machine to be
#              idle (< 15% CPU busy) (default 120; 0: don't)
#   TRAINER_LAUNCHER  mxrun (default) or torchrun: what launches the bundled trainer. On a GPU
#              machine where mxrun itself is not built (only the trainer, with
#              scripts/build-trainer-cuda.sh), torchrun --no_python runs it; the comparison is then
#              trainer against trainer, the launcher the same on both sides.
#   MXRUN      mxrun binary (default <repo>/build/bin/mxrun; its bundled trainer `train`
#              must sit beside it)
#   TORCHRUN   torchrun (default <repo>/.venv/bin/torchrun: torchrun 2.13 from the project's venv)
#   PYTHON     python used to drive the measurements (default <repo>/.venv/bin/python3)
#
# OMP_NUM_THREADS is removed from both jobs' environment, so both launchers set it to 1 for
# their workers; the rest of the environment is passed to both unchanged. glibc's allocator
# settings (MALLOC_*_ environment variables, GLIBC_TUNABLES) change CPU throughput markedly
# (freed activations returned to the kernel and faulted in again every step), so any that
# are set are listed in the report. torchrun 2.13 needs no extra flags (its default
# --monitor_interval is already 0.1 s). Every launcher is started in its own session and, should
# it overrun TIMEOUT, killed by that process group's id, its workers by their pids (torchrun 2.x
# starts each worker in a session of its own).
set -euo pipefail

script_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo_root="$(cd "$script_dir/../.." && pwd)"

RUNS="${RUNS:-3}"
MODEL="${MODEL:-resnet18}"
WIDTH="${WIDTH:-64}"
BATCH="${BATCH:-32}"
STEPS="${STEPS:-40}"
LOG_EVERY="${LOG_EVERY:-5}"
N="${N:-4096}"
DEVICE="${DEVICE:-cpu}"
TIMEOUT="${TIMEOUT:-1800}"
QUIET_WAIT="${QUIET_WAIT:-120}"
MXRUN="${MXRUN:-$repo_root/build/bin/mxrun}"
TRAINER_LAUNCHER="${TRAINER_LAUNCHER:-mxrun}"
TORCHRUN="${TORCHRUN:-$repo_root/.venv/bin/torchrun}"
PYTHON="${PYTHON:-$repo_root/.venv/bin/python3}"
REFERENCE="$script_dir/reference/ddp_resnet.py"

die() { echo "train.sh: $*" >&2; exit 2; }

case "$DEVICE" in
    cpu) NPROC="${NPROC:-2}"; AMP="${AMP:-off}";;
    cuda) NPROC="${NPROC:-1}"; AMP="${AMP:-bf16}";;
    *) die "DEVICE must be cpu or cuda, not '$DEVICE'";;
esac
for v in RUNS WIDTH BATCH STEPS LOG_EVERY N NPROC TIMEOUT QUIET_WAIT; do
    case "${!v}" in ''|*[!0-9]*) die "$v must be a whole number, not '${!v}'";; esac
    # No leading zeros: bash arithmetic would read them as octal.
    case "${!v}" in 0?*) die "$v must be written without leading zeros, not '${!v}'";; esac
done
for v in RUNS WIDTH BATCH STEPS LOG_EVERY N NPROC TIMEOUT; do
    [ "${!v}" -ge 1 ] || die "$v must be >= 1"
done
[ "$WIDTH" -le 1024 ] || die "WIDTH must be <= 1024 (the trainer's limit)"
[ "$STEPS" -ge $((2 * LOG_EVERY)) ] ||
    die "STEPS ($STEPS) must be at least 2 x LOG_EVERY ($LOG_EVERY): the first window is a warm-up and is dropped"
case "$MODEL" in
    resnet18|resnet34|resnet50|resnet101|resnet152) ;;
    *) die "MODEL must be resnet18, resnet34, resnet50, resnet101 or resnet152, not '$MODEL'";;
esac
case "$AMP" in off|bf16|fp16) ;; *) die "AMP must be off, bf16 or fp16, not '$AMP'";; esac
[ "$DEVICE" = cuda ] || [ "$AMP" = off ] || die "AMP=$AMP needs DEVICE=cuda"
case "$TRAINER_LAUNCHER" in mxrun|torchrun) ;; *) die "TRAINER_LAUNCHER must be mxrun or torchrun, not '$TRAINER_LAUNCHER'";; esac
[ "$TRAINER_LAUNCHER" = torchrun ] || [ -x "$MXRUN" ] ||
    die "mxrun not found or not executable: $MXRUN (build it: cd build && ninja mxrun)"
[ -x "$(dirname "$MXRUN")/train" ] ||
    die "the bundled trainer is not beside mxrun: $(dirname "$MXRUN")/train (build it: cd build && ninja train)"
[ -x "$TORCHRUN" ] || die "torchrun not found: $TORCHRUN"
[ -x "$PYTHON" ] || die "python not found: $PYTHON"
[ -r "$REFERENCE" ] || die "reference script not found: $REFERENCE"

workdir="$(mktemp -d "${TMPDIR:-/tmp}/mxrun-train-bench.XXXXXX")"
cleanup() { rm -rf -- "$workdir"; }
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# Private copies of mxrun, its trainer and the reference, so that a rebuild or an edit during
# the benchmark cannot swap them under it. mxrun runs the `train` that sits beside it.
mkdir "$workdir/bin"
# With TRAINER_LAUNCHER=torchrun mxrun itself may not exist (a GPU machine with the trainer only).
mxrun_used=false
if [ -x "$MXRUN" ]; then cp -- "$MXRUN" "$workdir/bin/mxrun"; mxrun_used=true; fi
# A bundle from scripts/gpu/bundle-mxrun.sh finds its libraries in ../lib (its RPATH): link it.
if [ -d "$(dirname "$MXRUN")/../lib" ]; then ln -s "$(cd "$(dirname "$MXRUN")/../lib" && pwd)" "$workdir/lib"; fi
cp -- "$(dirname "$MXRUN")/train" "$workdir/bin/train"
cp -- "$REFERENCE" "$workdir/bin/ddp_resnet.py"
train_sha="$(sha256sum "$workdir/bin/train" | cut -c1-12)"

# Header: how this was run, and on what.
invocation=""
for v in RUNS MODEL WIDTH BATCH STEPS LOG_EVERY N DEVICE AMP NPROC TIMEOUT QUIET_WAIT; do
    invocation+="$v=${!v} "
done
[ "$MXRUN" != "$repo_root/build/bin/mxrun" ] && invocation+="MXRUN=$MXRUN "
[ "$TRAINER_LAUNCHER" != mxrun ] && invocation+="TRAINER_LAUNCHER=$TRAINER_LAUNCHER "
[ "$TORCHRUN" != "$repo_root/.venv/bin/torchrun" ] && invocation+="TORCHRUN=$TORCHRUN "
[ "$PYTHON" != "$repo_root/.venv/bin/python3" ] && invocation+="PYTHON=$PYTHON "
invocation+="$0"
[ "$#" -gt 0 ] && invocation+=" $*"
# shellcheck source=scripts/bench/lib.sh
source "$script_dir/lib.sh"
bench_detect_env
gpu=""
if [ "$DEVICE" = cuda ] && command -v nvidia-smi >/dev/null 2>&1; then
    gpu="$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -n1 || true)"
fi
echo "## mxrun vs torchrun: training throughput ($MODEL, width $WIDTH, $DEVICE)"
echo
echo "- command: \`$invocation\`"
echo "- date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
echo "- machine: nproc=$(nproc), uname -r=$(uname -r)${cpu_model:+, cpu=$cpu_model}${gpu:+, gpu=$gpu}"
if $mxrun_used; then
    echo "- mxrun: \`$MXRUN\` ($("$workdir/bin/mxrun" --version 2>/dev/null | head -n1 || echo unknown), repo at $git_rev, binary sha256 $(sha256sum "$workdir/bin/mxrun" | cut -c1-12)..., trainer sha256 $train_sha...)"
else
    echo "- mxrun: not built here; the trainer \`$(dirname "$MXRUN")/train\` (repo at $git_rev, sha256 $train_sha...) runs under $TORCHRUN"
fi
echo "- torchrun: \`$TORCHRUN\` (torch $("$torch_py" -c 'import torch; print(torch.__version__)' 2>/dev/null || echo unknown), $("$torch_py" --version 2>&1)), reference \`scripts/bench/reference/ddp_resnet.py\` (sha256 $(sha256sum "$workdir/bin/ddp_resnet.py" | cut -c1-12)...)"
echo "- load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
malloc_env="$(env | grep -E '^(MALLOC_[A-Z_]+_|GLIBC_TUNABLES)=' | sort | tr '\n' ' ' || true)"
echo "- allocator environment (both jobs): ${malloc_env:+${malloc_env% }}${malloc_env:-none (glibc defaults)}"
echo "- runs: $RUNS per launcher, alternating; per run the first window of $LOG_EVERY steps is dropped (warm-up) and the median of the other $((STEPS / LOG_EVERY - 1)) kept; figures are medians over runs"
echo

export BENCH_RUNS="$RUNS" BENCH_MODEL="$MODEL" BENCH_WIDTH="$WIDTH" BENCH_BATCH="$BATCH" \
       BENCH_STEPS="$STEPS" BENCH_LOG_EVERY="$LOG_EVERY" BENCH_N="$N" BENCH_DEVICE="$DEVICE" \
       BENCH_AMP="$AMP" BENCH_NPROC="$NPROC" BENCH_TIMEOUT="$TIMEOUT" BENCH_QUIET_WAIT="$QUIET_WAIT" \
       BENCH_MXRUN="$workdir/bin/mxrun" BENCH_TORCHRUN="$TORCHRUN" \
       BENCH_TRAIN="$workdir/bin/train" BENCH_TRAINER_LAUNCHER="$TRAINER_LAUNCHER" \
       BENCH_REFERENCE="$workdir/bin/ddp_resnet.py" BENCH_WORKDIR="$workdir"

# The runs are driven from Python for bounded waits and JSON parsing. Every launcher is
# started in a new session and tracked (and, if need be, killed) by its process group id. The
# helpers it shares with the other bench scripts are in bench_common.py beside this script.
"$PYTHON" - "$script_dir" <<'PY'
import json, math, os, signal, statistics, subprocess, sys, time

sys.dont_write_bytecode = True
sys.path.insert(0, sys.argv[1])
from bench_common import (Log, busy_waits, descendants, kill_tree, loadavg, median,
                          print_problems, signal_group, signal_pids, wait_quiet)

E = os.environ
RUNS = int(E["BENCH_RUNS"])
MODEL, DEVICE, AMP = E["BENCH_MODEL"], E["BENCH_DEVICE"], E["BENCH_AMP"]
WIDTH, BATCH, STEPS = int(E["BENCH_WIDTH"]), int(E["BENCH_BATCH"]), int(E["BENCH_STEPS"])
LOG_EVERY, N, NPROC = int(E["BENCH_LOG_EVERY"]), int(E["BENCH_N"]), int(E["BENCH_NPROC"])
TIMEOUT = float(E["BENCH_TIMEOUT"])
QUIET_WAIT = float(E["BENCH_QUIET_WAIT"])
MXRUN, TORCHRUN, REFERENCE = E["BENCH_MXRUN"], E["BENCH_TORCHRUN"], E["BENCH_REFERENCE"]
WORK = E["BENCH_WORKDIR"]
CUDA = DEVICE == "cuda"

COMMON = ["--model", MODEL, "--width", str(WIDTH), "--batch_size", str(BATCH),
          "--max_steps", str(STEPS), "--log_every", str(LOG_EVERY), "--synthetic_train", str(N)]
if CUDA:
    COMMON += ["--device", "cuda", "--backend", "nccl", "--amp", AMP, "--channels_last"]
MXRUN_EXTRA = ["--no_eval", "--ckpt_dir", ""]   # + --metrics_file RUN/m.jsonl
# torchvision's ResNet comes in width 64 only; other widths use the reference's own ResNet (and so
# does width 64 where torchvision cannot be imported, as in the project's venv: the report's
# "reference model" line says which).
REFERENCE_EXTRA = (["--cudnn_benchmark"] + (["--torchvision"] if WIDTH == 64 else [])) if CUDA else []

# Both jobs run with OMP_NUM_THREADS unset: both launchers then give each worker 1 thread.
ENV = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS" and not k.startswith("BENCH_")}

log = Log("train.sh")
problems = log.problems
note, progress = log.warn, log.progress
live = set()   # process group ids of launchers that may still be running


def run_job(cmd, rundir):
    """Runs cmd (stdout/stderr to files in rundir); returns (rc, seconds, timed_out)."""
    with open(os.path.join(rundir, "stdout"), "wb") as out, \
         open(os.path.join(rundir, "stderr"), "wb") as err:
        t = time.perf_counter()
        p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=err, cwd=rundir,
                             env=ENV, start_new_session=True)
        live.add(p.pid)
        try:
            rc = p.wait(timeout=TIMEOUT)
            timed_out = False
        except subprocess.TimeoutExpired:
            # torchrun 2.x starts each worker in a session of its own: note them before the
            # launcher can go, and kill what is left of them after its grace period.
            tree = descendants(p.pid)
            signal_group(p.pid, signal.SIGTERM)
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                pass
            signal_group(p.pid)
            signal_pids(tree)
            rc = p.wait()
            timed_out = True
        dt = time.perf_counter() - t
        live.discard(p.pid)
    return rc, dt, timed_out


def json_lines(text):
    """JSON objects in text, one a line; launchers may prefix lines, so parse from the first {."""
    records = []
    for line in text.splitlines():
        i = line.find("{")
        if i < 0:
            continue
        try:
            r = json.loads(line[i:])
        except ValueError:
            continue
        if isinstance(r, dict) and "event" in r:
            records.append(r)
    return records


def tail(path, lines=15):
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-lines:])
    except OSError:
        return ""


def one_run(name, idx):
    rundir = os.path.join(WORK, f"{name}-{idx}")
    os.mkdir(rundir)
    if name == "mxrun":
        metrics = os.path.join(rundir, "m.jsonl")
        if E["BENCH_TRAINER_LAUNCHER"] == "torchrun":
            launcher = [TORCHRUN, "--standalone", f"--nproc_per_node={NPROC}", "--no_python",
                        E["BENCH_TRAIN"]]
        else:
            launcher = [MXRUN, "--standalone", f"--nproc_per_node={NPROC}", "train"]
        cmd = launcher + COMMON + MXRUN_EXTRA + ["--metrics_file", metrics]
    else:
        cmd = [TORCHRUN, "--standalone", f"--nproc_per_node={NPROC}", REFERENCE] + COMMON + REFERENCE_EXTRA
    progress(f"run {idx + 1}/{RUNS}: {name} ...")
    rc, seconds, timed_out = run_job(cmd, rundir)
    if name == "mxrun":
        try:
            with open(metrics) as f:
                records = json_lines(f.read())
        except OSError:
            records = []
    else:
        with open(os.path.join(rundir, "stdout"), errors="replace") as f:
            records = json_lines(f.read())
    label = f"{name} run {idx + 1}"
    if timed_out:
        note(f"{label}: no exit within {TIMEOUT:.0f}s, killed")
    elif rc != 0:
        note(f"{label}: exit code {rc}; end of its stderr:\n{tail(os.path.join(rundir, 'stderr'))}")
    steps = [r for r in records if r.get("event") == "step" and "images_per_sec" in r]
    done = [r for r in records if r.get("event") == "done"]
    start = next((r for r in records if r.get("event") == "start"), {})
    memory = next((r for r in records if r.get("event") == "memory"), None)
    if not done or done[-1].get("step") != STEPS:
        note(f"{label}: no 'done' record at step {STEPS} (got {done[-1].get('step') if done else 'none'})")
    world = {r.get("world_size") for r in steps}
    if steps and world != {NPROC}:
        note(f"{label}: world size {sorted(world, key=str)} in its step records, expected {NPROC}")
    rates = [float(r["images_per_sec"]) for r in steps]
    if len(rates) < 2:
        note(f"{label}: {len(rates)} throughput window(s), need at least 2")
        return None
    if len(rates) != STEPS // LOG_EVERY:
        note(f"{label}: {len(rates)} throughput windows, expected {STEPS // LOG_EVERY}")
    kept = rates[1:]
    result = {"rate": statistics.median(kept), "windows": kept, "seconds": seconds,
              "parameters": start.get("parameters"), "impl": start.get("impl"),
              "memory": memory.get("max_allocated_mib") if memory else None}
    progress(f"run {idx + 1}/{RUNS}: {name}: {result['rate']:.1f} images/s "
             f"(windows {', '.join(f'{r:.0f}' for r in rates)}; first dropped), {seconds:.1f} s")
    return result


def fmt(v, digits=1):
    if v is None or v != v:
        return "n/a"
    return f"{v:.{digits}f}" if v < 1000 else f"{v:.0f}"


def ratio(a, b):
    return "n/a" if a != a or b != b or b <= 0 else f"{a / b:.2f}x"


def main():
    results = {"mxrun": [], "reference": []}
    order = []
    for i in range(RUNS):
        wait_quiet(QUIET_WAIT, progress)
        pair = ["mxrun", "reference"] if i % 2 == 0 else ["reference", "mxrun"]
        order.append(pair[0])
        for name in pair:
            results[name].append(one_run(name, i))
    valid = {k: [r for r in v if r] for k, v in results.items()}
    for k in valid:
        progress(f"{k}: {len(valid[k])}/{RUNS} valid runs")

    rate = {k: median([r["rate"] for r in v]) for k, v in valid.items()}
    secs = {k: median([r["seconds"] for r in v]) for k, v in valid.items()}
    params = {k: {r["parameters"] for r in v} for k, v in valid.items()}
    if valid["mxrun"] and valid["reference"] and params["mxrun"] != params["reference"]:
        note(f"parameter counts differ: mxrun {sorted(params['mxrun'], key=str)}, "
             f"reference {sorted(params['reference'], key=str)}")

    def spread(k, key):
        vs = [r[key] for r in valid[k]]
        return f"{fmt(min(vs))} - {fmt(max(vs))}" if vs else "n/a"

    print(f"| measure | mxrun train | PyTorch DDP reference | ratio (mxrun/reference) |")
    print("|---|---:|---:|---:|")
    print(f"| training throughput, images/s (median) | {fmt(rate['mxrun'])} | {fmt(rate['reference'])} "
          f"| {ratio(rate['mxrun'], rate['reference'])} |")
    print(f"| throughput spread over runs, images/s (min - max) | {spread('mxrun', 'rate')} "
          f"| {spread('reference', 'rate')} | |")
    print(f"| launch-to-exit wall time per run, s (median) | {fmt(secs['mxrun'])} | {fmt(secs['reference'])} "
          f"| {ratio(secs['mxrun'], secs['reference'])} |")
    p = lambda k: ", ".join(str(x) for x in sorted(params[k], key=str)) or "n/a"
    print(f"| trainable parameters | {p('mxrun')} | {p('reference')} | |")
    if CUDA:
        mem = {k: median([r["memory"] for r in v if r["memory"] is not None]) for k, v in valid.items()}
        print(f"| peak GPU memory allocated, rank 0, MiB (median) | {fmt(mem['mxrun'])} "
              f"| {fmt(mem['reference'])} | {ratio(mem['mxrun'], mem['reference'])} |")
    print()
    print("Per run, images/s (median of the windows after the first; the launcher that went first "
          "in each pair is marked *):")
    print()
    print("| run | mxrun train | PyTorch DDP reference |")
    print("|---:|---:|---:|")
    for i in range(RUNS):
        cells = []
        for k in ("mxrun", "reference"):
            r = results[k][i]
            cells.append(("n/a" if r is None else fmt(r["rate"])) + (" *" if order[i] == k else ""))
        print(f"| {i + 1} | {cells[0]} | {cells[1]} |")
    print()
    impls = {r["impl"] for r in valid["reference"] if r.get("impl")}
    print(f"Setup: {MODEL}, width {WIDTH}, {NPROC} worker(s) on {DEVICE}, batch {BATCH} per worker "
          f"({BATCH * NPROC} global), {STEPS} steps, a throughput window every {LOG_EVERY} steps, "
          f"{N} synthetic images; reference model: {', '.join(sorted(impls)) or 'n/a'}.")
    steps_per_epoch = math.ceil(math.ceil(N / NPROC) / BATCH)
    if STEPS > steps_per_epoch:
        print(f"Note: {STEPS} steps cross an epoch boundary ({steps_per_epoch} steps per epoch); "
              "the trainer restarts its throughput window at each epoch start, so the window "
              "spanning the boundary covers fewer steps.")
    print()
    print("Commands (OMP_NUM_THREADS unset; RUN is a fresh folder per run):")
    print()
    q = lambda args: " ".join(a if a and all(c.isalnum() or c in "-_=./:" for c in a) else repr(a)
                              for a in args)
    print("- mxrun: `" + q(["mxrun", "--standalone", f"--nproc_per_node={NPROC}", "train"] + COMMON
                          + MXRUN_EXTRA + ["--metrics_file", "RUN/m.jsonl"]) + "`")
    print("- reference: `" + q(["torchrun", "--standalone", f"--nproc_per_node={NPROC}",
                                "scripts/bench/reference/ddp_resnet.py"] + COMMON + REFERENCE_EXTRA) + "`")
    print()
    print("Load average at end: " + loadavg() + "; "
          f"pairs that waited for an idle machine: {busy_waits['waited']}, "
          f"that ran on a busy one after {QUIET_WAIT:.0f}s: {busy_waits['gave_up']}")
    if busy_waits["gave_up"]:
        note(f"{busy_waits['gave_up']} pair(s) of runs started while other work used up to "
             f"{busy_waits['worst']:.0%} of the CPU; figures may be low")
    print_problems(problems)


try:
    main()
finally:
    for pgid in list(live):
        kill_tree(pgid)   # the launcher's group and its workers' own sessions
PY
