#!/usr/bin/env python3
"""Training-throughput benchmark: mxrun's bundled trainer against the PyTorch 2.13 DDP reference
(scripts/bench/reference/ddp_resnet.py under torchrun 2.13 from the project's venv), side by side.

Both train the same ResNet (torchvision layout, CIFAR stem) on synthetic CIFAR-shaped data
held in memory, with random crop + flip + normalisation, DistributedSampler sharding, SGD
(lr 0.1, momentum 0.9, weight decay 1e-4) and DDP-style gradient all-reduce (25 MiB buckets).
One difference is DDP's and kept: DDP broadcasts BatchNorm buffers from rank 0 before every
forward (broadcast_buffers=True, its default), the trainer only before evaluation (in training
BatchNorm normalises with batch statistics, so the running ones are not read there). With one
worker, as on CUDA by default, DDP still issues its broadcast (among one rank); the trainer none.

  mxrun:     $MXRUN --standalone --nproc_per_node=$NPROC train --model $MODEL --width $WIDTH
               --batch_size $BATCH --max_steps $STEPS --log_every $LOG_EVERY
               --synthetic_train $N --no_eval --ckpt_dir '' --metrics_file RUN/m.jsonl
  reference: $TORCHRUN --standalone --nproc_per_node=$NPROC
               scripts/bench/reference/ddp_resnet.py (same flags, minus --no_eval, --ckpt_dir
               and --metrics_file; on CUDA plus --cudnn_benchmark, which the trainer does by
               default there, and at width 64 --torchvision: torchvision's ResNet with a CIFAR
               stem where torchvision is installed; the project's venv has no torchvision, so
               there the reference uses its own ResNet of the same layout, as on CPU)

Every LOG_EVERY steps each side records images/s = global images of the window (batch x
world size x steps) over the window's wall time: the trainer in its --metrics_file, the
reference as JSON lines on rank 0's stdout. Per run the first window (warm-up) is dropped
and the median of the others kept; the report gives, per launcher, the median over runs and
the ratio mxrun/reference (above 1: mxrun's trainer is faster). The two alternate run by run
(the one going first alternates too), so both see the same background load.

Prints a Markdown report on stdout; progress on stderr.

Environment:
  RUNS       runs per launcher (default 3)
  MODEL      resnet18 | resnet34 | resnet50 | resnet101 | resnet152 (default resnet18)
  WIDTH      channels of the first stage (default 64, as torchvision)
  BATCH      images per worker per step (default 32)
  STEPS      optimizer steps per run (default 40); needs at least 2 windows
  LOG_EVERY  steps per throughput window (default 5)
  N          synthetic training images (default 4096)
  DEVICE     cpu (default) or cuda; cuda passes --device cuda --backend nccl --amp $AMP
             --channels_last to both sides, and reports each side's peak GPU memory
  AMP        off | bf16 | fp16, with DEVICE=cuda only (default bf16 on cuda)
  NPROC      workers (default 2 on cpu, 1 on cuda)
  TIMEOUT    seconds one run may take before it is killed (default 1800)
  QUIET_WAIT before each pair of runs, wait at most this many seconds for the machine to be
             idle (< 15% CPU busy) (default 120; 0: don't)
  TRAINER_LAUNCHER  mxrun (default) or torchrun: what launches the bundled trainer. On a GPU
             machine where mxrun itself is not built (only the trainer, with
             scripts/gpu/build-trainer-cuda.sh), torchrun --no_python runs it; the comparison is then
             trainer against trainer, the launcher the same on both sides.
  MXRUN      mxrun binary (default <repo>/build/bin/mxrun; its bundled trainer `train`
             must sit beside it)
  TORCHRUN   torchrun (default <repo>/.venv/bin/torchrun: torchrun 2.13 from the project's venv)
train.sh runs it with $PYTHON (default <repo>/.venv/bin/python3), which drives the runs.

OMP_NUM_THREADS is removed from both jobs' environment, so both launchers set it to 1 for
their workers; the rest of the environment is passed to both unchanged. glibc's allocator
settings (MALLOC_*_ environment variables, GLIBC_TUNABLES) change CPU throughput markedly
(freed activations returned to the kernel and faulted in again every step), so any that
are set are listed in the report. torchrun 2.13 needs no extra flags (its default
--monitor_interval is already 0.1 s). mxrun, its trainer and the reference run as private copies,
so that a rebuild or an edit during the benchmark cannot swap them. Every launcher is started in
its own session and, should it overrun TIMEOUT, killed by that process group's id, its workers by
their pids (torchrun 2.x starts each worker in a session of its own).
"""
import json
import math
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_common import (DEFAULT_MXRUN, DEFAULT_PYTHON, DEFAULT_TORCHRUN, REPO, Log,  # noqa: E402
                          descendants, detect_env, die, env, executable, is_whole, kill_tree,
                          link_bundle_lib, loadavg, machine, make_workdir, median, output_of,
                          print_busy_waits, print_problems, private_copy, python_version,
                          run_main, sha256_12, signal_group, signal_pids, torch_version, utc_now,
                          version_line, wait_quiet)

SCRIPT = "train.sh"


def fail(msg):
    die(SCRIPT, msg)


# ---------------------------------------------------------------- settings
S = {"RUNS": env("RUNS", "3"), "MODEL": env("MODEL", "resnet18"), "WIDTH": env("WIDTH", "64"),
     "BATCH": env("BATCH", "32"), "STEPS": env("STEPS", "40"),
     "LOG_EVERY": env("LOG_EVERY", "5"), "N": env("N", "4096"), "DEVICE": env("DEVICE", "cpu")}
if S["DEVICE"] == "cpu":
    S["AMP"], S["NPROC"] = env("AMP", "off"), env("NPROC", "2")
elif S["DEVICE"] == "cuda":
    S["AMP"], S["NPROC"] = env("AMP", "bf16"), env("NPROC", "1")
else:
    fail(f"DEVICE must be cpu or cuda, not '{S['DEVICE']}'")
S["TIMEOUT"], S["QUIET_WAIT"] = env("TIMEOUT", "1800"), env("QUIET_WAIT", "120")
MXRUN_GIVEN = env("MXRUN", DEFAULT_MXRUN)
TRAINER_LAUNCHER = env("TRAINER_LAUNCHER", "mxrun")
TORCHRUN = env("TORCHRUN", DEFAULT_TORCHRUN)
REFERENCE_GIVEN = os.path.join(REPO, "scripts/bench/reference/ddp_resnet.py")
TRAIN_GIVEN = os.path.join(os.path.dirname(MXRUN_GIVEN), "train")

for _name in ("RUNS", "WIDTH", "BATCH", "STEPS", "LOG_EVERY", "N", "NPROC", "TIMEOUT", "QUIET_WAIT"):
    if not is_whole(S[_name]):
        fail(f"{_name} must be a whole number, not '{S[_name]}'")
    if len(S[_name]) > 1 and S[_name].startswith("0"):
        fail(f"{_name} must be written without leading zeros, not '{S[_name]}'")
for _name in ("RUNS", "WIDTH", "BATCH", "STEPS", "LOG_EVERY", "N", "NPROC", "TIMEOUT"):
    if int(S[_name]) < 1:
        fail(f"{_name} must be >= 1")
if int(S["WIDTH"]) > 1024:
    fail("WIDTH must be <= 1024 (the trainer's limit)")
if int(S["STEPS"]) < 2 * int(S["LOG_EVERY"]):
    fail(f"STEPS ({S['STEPS']}) must be at least 2 x LOG_EVERY ({S['LOG_EVERY']}): the first "
         "window is a warm-up and is dropped")
if S["MODEL"] not in ("resnet18", "resnet34", "resnet50", "resnet101", "resnet152"):
    fail(f"MODEL must be resnet18, resnet34, resnet50, resnet101 or resnet152, not '{S['MODEL']}'")
if S["AMP"] not in ("off", "bf16", "fp16"):
    fail(f"AMP must be off, bf16 or fp16, not '{S['AMP']}'")
if S["DEVICE"] != "cuda" and S["AMP"] != "off":
    fail(f"AMP={S['AMP']} needs DEVICE=cuda")
if TRAINER_LAUNCHER not in ("mxrun", "torchrun"):
    fail(f"TRAINER_LAUNCHER must be mxrun or torchrun, not '{TRAINER_LAUNCHER}'")
if TRAINER_LAUNCHER != "torchrun" and not executable(MXRUN_GIVEN):
    fail(f"mxrun not found or not executable: {MXRUN_GIVEN} (build it: cd build && ninja mxrun)")
if not executable(TRAIN_GIVEN):
    fail(f"the bundled trainer is not beside mxrun: {TRAIN_GIVEN} (build it: cd build && ninja "
         "train)")
if not executable(TORCHRUN):
    fail(f"torchrun not found: {TORCHRUN}")
if not os.access(REFERENCE_GIVEN, os.R_OK):
    fail(f"reference script not found: {REFERENCE_GIVEN}")

RUNS = int(S["RUNS"])
MODEL, DEVICE, AMP = S["MODEL"], S["DEVICE"], S["AMP"]
WIDTH, BATCH, STEPS = int(S["WIDTH"]), int(S["BATCH"]), int(S["STEPS"])
LOG_EVERY, N, NPROC = int(S["LOG_EVERY"]), int(S["N"]), int(S["NPROC"])
TIMEOUT = float(S["TIMEOUT"])
QUIET_WAIT = float(S["QUIET_WAIT"])
CUDA = DEVICE == "cuda"

WORK = make_workdir("mxrun-train-bench.")
# Private copies of mxrun, its trainer and the reference (prepare). mxrun runs the `train` that
# sits beside it. With TRAINER_LAUNCHER=torchrun mxrun itself may not exist (a GPU machine with
# the trainer only).
MXRUN_USED = executable(MXRUN_GIVEN)
MXRUN = os.path.join(WORK, "bin", "mxrun")
TRAIN = os.path.join(WORK, "bin", "train")
REFERENCE = os.path.join(WORK, "bin", "ddp_resnet.py")

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

log = Log(SCRIPT)
problems = log.problems
note, progress = log.warn, log.progress
live = set()   # process group ids of launchers that may still be running


def prepare():
    os.mkdir(os.path.join(WORK, "bin"))
    if MXRUN_USED:
        private_copy(MXRUN_GIVEN, MXRUN)
    link_bundle_lib(MXRUN_GIVEN, WORK)
    private_copy(TRAIN_GIVEN, TRAIN)
    private_copy(REFERENCE_GIVEN, REFERENCE)


def print_header():
    """How this was run, and on what."""
    invocation = "".join(f"{name}={S[name]} " for name in
                         ("RUNS", "MODEL", "WIDTH", "BATCH", "STEPS", "LOG_EVERY", "N", "DEVICE",
                          "AMP", "NPROC", "TIMEOUT", "QUIET_WAIT"))
    if MXRUN_GIVEN != DEFAULT_MXRUN:
        invocation += f"MXRUN={MXRUN_GIVEN} "
    if TRAINER_LAUNCHER != "mxrun":
        invocation += f"TRAINER_LAUNCHER={TRAINER_LAUNCHER} "
    if TORCHRUN != DEFAULT_TORCHRUN:
        invocation += f"TORCHRUN={TORCHRUN} "
    if sys.executable != DEFAULT_PYTHON:
        invocation += f"PYTHON={sys.executable} "
    invocation += "scripts/bench/train.sh" + "".join(" " + a for a in sys.argv[1:])
    e = detect_env(TORCHRUN)
    gpu = ""
    if CUDA and shutil.which("nvidia-smi"):
        gpu = (output_of(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"])
               or "").split("\n")[0]
    train_sha = sha256_12(TRAIN)
    print(f"## mxrun vs torchrun: training throughput ({MODEL}, width {WIDTH}, {DEVICE})")
    print()
    print(f"- command: `{invocation}`")
    print(f"- date: {utc_now()}")
    print(f"- machine: {machine(e.cpu_model)}" + (f", gpu={gpu}" if gpu else ""))
    if MXRUN_USED:
        print(f"- mxrun: `{MXRUN_GIVEN}` ({version_line(MXRUN)}, repo at {e.git_rev}, binary sha256 "
              f"{sha256_12(MXRUN)}..., trainer sha256 {train_sha}...)")
    else:
        print(f"- mxrun: not built here; the trainer `{TRAIN_GIVEN}` (repo at {e.git_rev}, sha256 "
              f"{train_sha}...) runs under {TORCHRUN}")
    print(f"- torchrun: `{TORCHRUN}` (torch {torch_version(e.torch_py)}, "
          f"{python_version(e.torch_py)}), reference `scripts/bench/reference/ddp_resnet.py` "
          f"(sha256 {sha256_12(REFERENCE)}...)")
    print(f"- load average at start: {loadavg()}")
    malloc_env = sorted(f"{k}={v}" for k, v in os.environ.items()
                        if re.match(r"(MALLOC_[A-Z_]+_|GLIBC_TUNABLES)=", f"{k}="))
    print("- allocator environment (both jobs): "
          + (" ".join(malloc_env) if malloc_env else "none (glibc defaults)"))
    print(f"- runs: {RUNS} per launcher, alternating; per run the first window of {LOG_EVERY} steps "
          f"is dropped (warm-up) and the median of the other {STEPS // LOG_EVERY - 1} kept; "
          "figures are medians over runs")
    print(flush=True)


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
        if TRAINER_LAUNCHER == "torchrun":
            launcher = [TORCHRUN, "--standalone", f"--nproc_per_node={NPROC}", "--no_python",
                        TRAIN]
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
    prepare()
    print_header()
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
    print_busy_waits(QUIET_WAIT, "pairs", "pair(s) of runs started", "figures may be low", note)
    print_problems(problems)


def cleanup():
    for pgid in list(live):
        kill_tree(pgid)   # the launcher's group and its workers' own sessions
    shutil.rmtree(WORK, ignore_errors=True)


if __name__ == "__main__":
    run_main(main, cleanup)
