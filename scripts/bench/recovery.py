#!/usr/bin/env python3
"""Recovery without lost work, measured: one node, 2 CPU workers, ResNet-18 at width 16 on
synthetic CIFAR-shaped data (N images), a checkpoint every 5 steps and a metrics record every
step, side by side in one run:

  mxrun + train            the bundled trainer; a failed rank is replaced while the other worker
                           keeps its process and hands over its state (in-process restart)
  mxrun + train (old way)  the same with --no_in_process_restart: every worker starts again and
                           resumes from the checkpoint
  torchrun + Python        torchrun 2.13 from the project's venv and
                           scripts/bench/reference/ddp_resnet.py (PyTorch 2.13 DDP on CPU),
                           resuming from its rank-0 checkpoint; with
                           TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1 (see TORCH_ENV below)

Cases (RUNS times each, medians):
  recovery: once step K is logged (and, for mxrun + train, its warm standby is ready, as it is
            for all but the first seconds of a job), SIGKILL rank KILL_RANK's process; the time
            from the kill to the first training step logged after it, and the completed steps
            lost (the last step logged before the kill minus the step the group went on from). The
            standby's resident memory is read then, beside a worker's.
  cold:     launch to the first training step logged.
Each record carries the wall clock ("time"), so the times are read from the logs, not guessed.

SCRIPT=elastic measures scripts/examples/elastic_ddp.py (a user's DDP script with the mxrun module,
ResNet-18 width 16, batch 64, 8192 images, a checkpoint every 5 steps) instead: under mxrun with a
warm standby and with a new process for the killed rank, against torchrun resuming from its
checkpoint. SCRIPT=unmodified measures the reference ddp_resnet.py itself under both launchers
(no mxrun module: every worker restarts and resumes from the checkpoint), and where each
restart's time went, seen from outside (OUTSIDE_PHASES below).

KILL_AFTER=0.5,1,2,5,20 replaces the recovery case by a sweep of early failures: rank 1 is
SIGKILLed that many seconds after the first training step is logged, whatever its standby is
doing (still starting, or ready), for each time in turn; the cold case is left out.

Usage: recovery.py  (environment: RUNS, N, KILL_AT, KILL_AFTER, OLD_WAY (default 1), WAIT (default 300 s),
SCRIPT (trainer, elastic or unmodified), RECONFIGURE (0 or 1, with SCRIPT=elastic),
KILL_RANK (default the last rank), COLD (0 leaves out the cold start), QUIET_WAIT (default 120 s:
before each measured run, the longest wait for an idle machine; 0 does not wait), MXRUN, TORCHRUN (default
<repo>/.venv/bin/torchrun)); recovery.sh runs it with $PYTHON (default <repo>/.venv/bin/python3).
On a GPU machine (scripts/gpu/run-all.sh): DEVICE=cuda gives both sides --device cuda --backend
nccl --amp bf16, NPROC the workers (default 2; one per GPU there) and the killed rank is the last
one (rank NPROC-1).
Everything it starts is killed by process group or pid (its workers too, found as the launcher's
descendants or by a marker in their environment), never by name.
"""
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_common import (busy_waits, descendants, kill_marked, kill_tree, torch_python,  # noqa: E402
                          wait_quiet)
from samples import keep  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RUNS = int(os.environ.get("RUNS", "5"))
N = int(os.environ.get("N", "50000"))
KILL_AT = int(os.environ.get("KILL_AT", "12"))
# The longest wait for each stage of a run (its first steps, the standby, the step after the
# kill): a run that does not get there in time counts as "no step seen".
WAIT = float(os.environ.get("WAIT", "300"))
DEVICE = os.environ.get("DEVICE", "cpu")
NPROC = int(os.environ.get("NPROC", "2"))
# KILL_RANK: the rank SIGKILLed (default the last one); KILL_RANK=0 kills the rank that hosts
# PyTorch's store when the launcher does not (torchrun here, mxrun with --workers_store=rank0).
try:
    KILL_RANK = int(os.environ.get("KILL_RANK", str(NPROC - 1)))
except ValueError:
    KILL_RANK = -1
if not 0 <= KILL_RANK < NPROC:
    raise SystemExit(f"recovery: KILL_RANK={os.environ.get('KILL_RANK')}: accepted is a rank "
                     f"from 0 to {NPROC - 1}")
# COLD=0 leaves out the cold-start case (a sweep over KILL_RANK needs it once).
COLD = os.environ.get("COLD", "1")
# Before each measured run, wait at most this many seconds for an idle machine (0: don't wait).
QUIET_WAIT = float(os.environ.get("QUIET_WAIT", "120"))
if COLD not in ("0", "1"):
    raise SystemExit(f"recovery: COLD={COLD}: accepted are 0 and 1")
MXRUN = os.environ.get("MXRUN", os.path.join(REPO, "build/bin/mxrun"))
DEFAULT_TORCHRUN = os.path.join(REPO, ".venv/bin/torchrun")
DEFAULT_PYTHON = os.path.join(REPO, ".venv/bin/python3")   # recovery.sh's default
TORCHRUN = os.environ.get("TORCHRUN", DEFAULT_TORCHRUN)
REFERENCE = os.path.join(REPO, "scripts/bench/reference/ddp_resnet.py")
# torchrun 2.13 gets the same flags as mxrun: its default --monitor_interval is already 0.1 s,
# so it notices a failure as fast as it can.
# torchrun 2.13 shares its rendezvous TCPStore with the workers and keeps that one store across
# restarts, while the workers' env:// init assumes a fresh store per attempt (no per-attempt key
# prefix): after a restart, Gloo's connectFullMesh can read rank 0's address of the attempt that
# died and fail with "Connection refused" (seen here: the restarted group never trained). Its own
# opt-out brings back a fresh store per attempt, hosted by rank 0 (pytorch/pytorch#135712).
TORCH_ENV = {"TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1"}
COMMON = ["--width", "16", "--batch_size", "64", "--synthetic_train", str(N), "--epochs", "1",
          "--log_every", "1", "--ckpt_every", "5"]
if DEVICE == "cuda":
    COMMON += ["--device", "cuda", "--backend", "nccl", "--amp", "bf16"]
elif DEVICE != "cpu":
    raise SystemExit(f"recovery: DEVICE={DEVICE}: accepted are cpu and cuda")
WORK = tempfile.mkdtemp(prefix="mxrun-recovery-bench.")
# OLD_WAY=0 leaves out "mxrun + train (old way)" (a GPU machine's device time is short).
OLD_WAY = os.environ.get("OLD_WAY", "1")
if OLD_WAY not in ("0", "1"):
    raise SystemExit(f"recovery: OLD_WAY={OLD_WAY}: accepted are 0 and 1")
KINDS = ["mxrun + train", *(["mxrun + train (old way)"] if OLD_WAY == "1" else []),
         "torchrun + Python"]
# SCRIPT=elastic: a user's own PyTorch script instead (scripts/examples/elastic_ddp.py, which
# recovers in-process through the mxrun module), under mxrun with and without a warm standby and
# under torchrun, where it resumes from its checkpoint.
# SCRIPT=unmodified: the reference ddp_resnet.py itself (no mxrun module) under both launchers:
# every worker restarts and resumes from the checkpoint, and each run says where the time went.
# SCRIPT=lightning: tests/python/frameworks/lightning_job.py (a Lightning job, nothing of mxrun
# in it, a 50 ms step, last.ckpt every 5 steps) the same way: with and without --prestart.
SCRIPT = os.environ.get("SCRIPT", "trainer")
if SCRIPT not in ("trainer", "elastic", "unmodified", "lightning"):
    raise SystemExit(f"recovery: SCRIPT={SCRIPT}: accepted are trainer, elastic, unmodified and "
                     "lightning")
LIGHTNING = os.path.join(REPO, "tests/python/frameworks/lightning_job.py")
ELASTIC = os.path.join(REPO, "scripts/examples/elastic_ddp.py")
# RECONFIGURE=1 (SCRIPT=elastic, a PyTorch with torch.distributed._reconfigure as $PYTHON: 2.14,
# .venv-cuda) adds both mxrun cases again with MXRUN_RECONFIGURE=1: the survivors' group
# re-formed in place rather than anew (python/mxrun/_groups.py).
RECONFIGURE = os.environ.get("RECONFIGURE", "0")
if RECONFIGURE not in ("0", "1") or (RECONFIGURE == "1" and SCRIPT != "elastic"):
    raise SystemExit(f"recovery: RECONFIGURE={RECONFIGURE}: accepted are 0, and 1 with "
                     "SCRIPT=elastic")
if SCRIPT == "elastic":
    KINDS = ["mxrun + elastic_ddp.py, warm standby", "mxrun + elastic_ddp.py, new process",
             *(["mxrun + elastic_ddp.py, warm standby, reconfigure",
                "mxrun + elastic_ddp.py, new process, reconfigure"] if RECONFIGURE == "1"
               else []),
             "torchrun + elastic_ddp.py"]
if SCRIPT == "unmodified":
    KINDS = ["mxrun + ddp_resnet.py, prestarted", "mxrun + ddp_resnet.py",
             "torchrun + ddp_resnet.py"]
if SCRIPT == "lightning":
    KINDS = ["mxrun + lightning_job.py, prestarted", "mxrun + lightning_job.py",
             "torchrun + lightning_job.py"]
MINE, REF = (KINDS[0], KINDS[-1])
try:
    KILL_AFTER = [float(x) for x in os.environ.get("KILL_AFTER", "").split(",") if x.strip()]
except ValueError:
    KILL_AFTER = [-1.0]
if any(not 0 <= x <= 600 for x in KILL_AFTER):
    raise SystemExit(f"recovery: KILL_AFTER={os.environ.get('KILL_AFTER')}: accepted is a comma "
                     "list of seconds from 0 to 600 after the first step")
memory = []  # (standby RSS, worker RSS) in MiB, per mxrun + train recovery run
PHASES = ("until_round", "join", "restore", "first_step")
# An unmodified script's restart, from the outside: the kill -> a new rank-0 process (the launcher
# saw the failure, stopped the others, formed the next round, started the workers; with
# --prestart: mxrun's line saying it handed the ranks to its interpreters) -> the script's
# "start" record (interpreter, import torch, data, model, init_process_group, DDP) -> "resume"
# (checkpoint read) -> the first step logged.
OUTSIDE_PHASES = ("until_new_process", "until_start", "checkpoint", "first_step")
phases = {}  # kind -> the trainer's recovery records' "phases", one per run that wrote them
startup = {}  # kind -> launch to the first step, in the KILL_AFTER sweep's runs


def command(kind, run_dir):
    ckpt = ["--ckpt_dir", os.path.join(run_dir, "ckpt")]
    if "elastic_ddp" in kind:
        script = [ELASTIC, "--width", "16", "--batch_size", "64", "--images", "8192",
                  "--steps", "100000", *ckpt, "--ckpt_every", "5"]
        if kind.startswith("mxrun"):
            standby = ["--standby_workers=1"] if "standby" in kind else []
            return [MXRUN, "--standalone", f"--nproc_per_node={NPROC}", "--max_restarts=1",
                    *standby, *script]
        return [TORCHRUN, "--standalone", f"--nproc_per_node={NPROC}", "--max_restarts=1",
                *script]
    if "lightning_job" in kind:
        launcher = MXRUN if kind.startswith("mxrun") else TORCHRUN
        prestart = ["--prestart"] if "prestarted" in kind else []
        return [launcher, "--standalone", f"--nproc_per_node={NPROC}", "--max_restarts=1",
                *prestart, LIGHTNING, "--steps", "100000", "--step_sleep", "0.05", *ckpt]
    if "ddp_resnet" in kind:
        launcher = MXRUN if kind.startswith("mxrun") else TORCHRUN
        prestart = ["--prestart"] if "prestarted" in kind else []
        return [launcher, "--standalone", f"--nproc_per_node={NPROC}", "--max_restarts=1",
                *prestart, REFERENCE, *COMMON, *ckpt]
    if kind.startswith("mxrun"):
        extra = ["--no_in_process_restart"] if "old way" in kind else []
        return [MXRUN, "--standalone", f"--nproc_per_node={NPROC}", "--max_restarts=1", "train",
                *COMMON, *ckpt, "--no_eval", "--metrics_file", os.path.join(run_dir, "m.jsonl"),
                *extra]
    return [TORCHRUN, "--standalone", f"--nproc_per_node={NPROC}", "--max_restarts=1",
            REFERENCE, *COMMON, *ckpt]


def records(kind, run_dir, out_path):
    """The JSON records of rank 0: the trainer's metrics file, or the script's stdout (under mxrun
    behind its "[n0 r0] " prefix)."""
    trainer = kind.startswith("mxrun") and not any(s in kind for s in ("elastic_ddp", "ddp_resnet",
                                                                     "lightning_job"))
    path = os.path.join(run_dir, "m.jsonl") if trainer else out_path
    found = []
    try:
        with open(path, errors="replace") as f:
            for line in f:
                line = line.strip()
                if line.startswith("[n") and "] {" in line:
                    line = line[line.index("] {") + 2:]
                if not line.startswith("{"):
                    continue
                try:
                    found.append(json.loads(line))
                except ValueError:
                    pass
    except OSError:
        pass
    return found


def steps(recs):
    found = [r for r in recs if r.get("event") == "step"]
    for r in found:  # lightning_job.py names it as Lightning does
        if "step" not in r and "global_step" in r:
            r["step"] = r["global_step"]
    return found


def env_of(pid, key):
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            for entry in f.read().split(b"\0"):
                if entry.startswith(key.encode() + b"="):
                    return entry[len(key) + 1:].decode(errors="replace")
    except OSError:
        pass
    return None


def rss_mib(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except (OSError, ValueError):
        pass
    return None


def rank_of(pid):
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            for entry in f.read().split(b"\0"):
                if entry.startswith(b"RANK="):
                    return int(entry[5:])
    except (OSError, ValueError):
        pass
    return None


def wait_until(pred, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        r = pred()
        if r:
            return r
        time.sleep(0.01)
    return None


def progress(message):
    print(f"recovery: {message}", file=sys.stderr, flush=True)


def one_run(kind, case, idx, kill_after=None):
    """One run of `kind`; `idx` -1 is a warm-up, whose figures are not kept."""
    run_dir = tempfile.mkdtemp(dir=WORK, prefix=f"{case}.")
    out_path = os.path.join(run_dir, "out")
    t_launch = time.time()
    # The marker finds whatever the run leaves behind (see the finally clause).
    env = dict(os.environ, BENCH_RECOVERY_RUN=run_dir,
               **({} if kind.startswith("mxrun") else TORCH_ENV))
    if "ddp_resnet" in kind and kind.startswith("mxrun"):
        env.update(PYTHON_EXEC=sys.executable, PYTHONPATH=os.path.join(REPO, "python"))
    if "lightning_job" in kind:
        os.makedirs(os.path.join(run_dir, "ckpt"))
        if kind.startswith("mxrun"):
            env.update(PYTHON_EXEC=sys.executable, PYTHONPATH=os.path.join(REPO, "python"))
    if "elastic_ddp" in kind:
        os.makedirs(os.path.join(run_dir, "ckpt"))
        env.update(PYTHON_EXEC=sys.executable, PYTHONPATH=os.path.join(REPO, "python"),
                   MXRUN_RECONFIGURE="1" if "reconfigure" in kind else "0")
    with open(out_path, "wb") as out:
        p = subprocess.Popen(command(kind, run_dir), stdout=out, stderr=subprocess.STDOUT,
                             stdin=subprocess.DEVNULL, cwd=run_dir, env=env,
                             start_new_session=True)
    try:
        if case == "cold":
            first = wait_until(lambda: steps(records(kind, run_dir, out_path)), WAIT)
            return (first[0]["time"] - t_launch, None) if first else (None, None)
        if kill_after is not None:  # the sweep: a set time after the first step, ready or not
            first = wait_until(lambda: steps(records(kind, run_dir, out_path)), WAIT)
            if not first:
                return None, None
            startup.setdefault(kind, []).append(first[0]["time"] - t_launch)
            time.sleep(max(0.0, first[0]["time"] + kill_after - time.time()))
        elif not wait_until(lambda: any(r["step"] >= KILL_AT for r in
                                        steps(records(kind, run_dir, out_path))), WAIT):
            return None, None
        if kill_after is None and (kind == "mxrun + train" or "standby" in kind
                                   or "prestarted" in kind):
            # --prestart keeps one interpreter per rank: the kill waits for all of them.
            wanted = NPROC if "prestarted" in kind else 1

            def standby_ready():
                with open(out_path, errors="replace") as f:
                    return f.read().count("ready to take a rank in-process") >= wanted
            if not wait_until(standby_ready, min(WAIT, 120)):
                return None, None
            tree = descendants(p.pid)
            standby = next((c for c in tree if env_of(c, "MXRUN_STANDBY") == "1"), None)
            worker = next((c for c in tree if rank_of(c) == KILL_RANK), None)
            if standby and worker and idx >= 0:
                memory.append((rss_mib(standby), rss_mib(worker)))
        victim = next((c for c in descendants(p.pid) if rank_of(c) == KILL_RANK), None)
        if victim is None:
            return None, None
        before = max(r["step"] for r in steps(records(kind, run_dir, out_path)))
        old_rank0 = {c for c in descendants(p.pid) if rank_of(c) == 0}
        seen = {}  # when a new rank-0 process was first seen

        def first_step_after():
            if "new_process" not in seen:
                if "prestarted" in kind:  # the rank goes to a process that is already there
                    with open(out_path, errors="replace") as f:
                        if "; started rank(s) 0 (standby pid" in f.read():
                            seen["new_process"] = time.time()
                elif any(rank_of(c) == 0 and c not in old_rank0 for c in descendants(p.pid)):
                    seen["new_process"] = time.time()
            recs = records(kind, run_dir, out_path)
            if "lightning_job" in kind or "ddp_resnet" in kind:
                # The survivor may log one more step just after the kill: the restarted attempt's
                # steps are those after its own fit_start (Lightning) or start record (seen as a
                # first step 0.01 s after the kill, 2026-12-07).
                first_record = "fit_start" if "lightning_job" in kind else "start"
                began = [i for i, r in enumerate(recs)
                         if r.get("event") == first_record and r["time"] > t_kill]
                recs = recs[began[0]:] if began else []
            return [r for r in steps(recs) if r["time"] > t_kill and r["step"] <= before + 1000]
        t_kill = time.time()
        os.kill(victim, signal.SIGKILL)
        after = wait_until(first_step_after, WAIT)
        if not after:
            return None, None
        if "ddp_resnet" in kind:
            recs = [r for r in records(kind, run_dir, out_path) if r.get("time", 0) > t_kill]
            start = next((r["time"] for r in recs if r.get("event") == "start"), None)
            resume = next((r["time"] for r in recs if r.get("event") == "resume"), None)
            new = seen.get("new_process")
            if start and resume and new and idx >= 0:
                phases.setdefault(kind, []).append({
                    "until_new_process": new - t_kill, "until_start": start - new,
                    "checkpoint": resume - start, "first_step": after[0]["time"] - resume})
        elif kind.startswith("mxrun") and "elastic_ddp" not in kind and "lightning" not in kind:
            # The trainer's own account of where the time went (its recovery record, written
            # with the first step after the failure).
            rec = wait_until(lambda: [r for r in records(kind, run_dir, out_path)
                                      if r.get("event") == "recovery" and "phases" in r], 5)
            if rec and idx >= 0:
                phases.setdefault(kind, []).append(rec[0]["phases"])
        # Logged before the kill, perhaps a moment before this script read it.
        last_before = max([before] + [r["step"] for r in steps(records(kind, run_dir, out_path))
                                      if r["time"] <= t_kill])
        went_on_from = after[0]["step"] - 1
        return after[0]["time"] - t_kill, max(0, last_before - went_on_from)
    finally:
        # The launcher's group, and its workers: torchrun 2.x starts each in a session of its own.
        kill_tree(p.pid)
        p.wait()
        kill_marked("BENCH_RECOVERY_RUN=" + run_dir)


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def torch_version():
    """torch as torchrun's own interpreter (its #! line) sees it."""
    try:
        r = subprocess.run([torch_python(TORCHRUN), "-c", "import torch; print(torch.__version__)"],
                           capture_output=True, text=True, timeout=120)
        return "torch " + (r.stdout.strip() or "unknown")
    except (OSError, IndexError, subprocess.SubprocessError):
        return "torch unknown"


def command_line():
    """The command that runs this very measurement again."""
    return (f"RUNS={RUNS} N={N} "
          + (f"KILL_AFTER={os.environ['KILL_AFTER']}" if KILL_AFTER else f"KILL_AT={KILL_AT}")
          + ("" if SCRIPT == "trainer" else f" SCRIPT={SCRIPT}")
          + ("" if RECONFIGURE == "0" else " RECONFIGURE=1")
          + ("" if DEVICE == "cpu" else f" DEVICE={DEVICE}")
          + ("" if NPROC == 2 else f" NPROC={NPROC}")
          + ("" if KILL_RANK == NPROC - 1 else f" KILL_RANK={KILL_RANK}")
          + ("" if COLD == "1" else " COLD=0")
          + ("" if OLD_WAY == "1" else " OLD_WAY=0")
          + ("" if MXRUN == os.path.join(REPO, "build/bin/mxrun") else f" MXRUN={MXRUN}")
          + ("" if TORCHRUN == DEFAULT_TORCHRUN else f" TORCHRUN={TORCHRUN}")
          + ("" if sys.executable == DEFAULT_PYTHON else f" PYTHON={sys.executable}")
          + " scripts/bench/recovery.sh")


def main():
    needed = [MXRUN, TORCHRUN] + ([os.path.join(os.path.dirname(MXRUN), "train")]
                                   if SCRIPT == "trainer" else [])
    for b in needed:
        if not os.access(b, os.X_OK):
            raise SystemExit(f"recovery: not found: {b}")
    print("### Recovery and cold start: " + ("mxrun + train vs torchrun + PyTorch DDP\n"
          if SCRIPT == "trainer" else "a PyTorch DDP script under mxrun vs torchrun\n"))
    print(f"- command: `{command_line()}`")
    print(f"- torchrun: `{TORCHRUN}` ({torch_version()}), run with "
          + " ".join(f"{k}={v}" for k, v in TORCH_ENV.items()))
    if SCRIPT != "trainer":
        r = subprocess.run([sys.executable, "-c", "import torch; print(torch.__version__)"],
                           capture_output=True, text=True, timeout=120)
        print(f"- mxrun's Python workers: `{sys.executable}` (torch {r.stdout.strip() or 'unknown'})")
    print(f"- date: {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}; nproc="
          f"{os.cpu_count()}; {NPROC} {'CPU' if DEVICE == 'cpu' else 'GPU (bf16)'} workers, "
          + ("tests/python/frameworks/lightning_job.py, a 50 ms step" if SCRIPT == "lightning"
             else f"ResNet-18 width 16, batch 64 per worker, "
                  f"{8192 if SCRIPT == 'elastic' else N} synthetic images")
          + ", checkpoint every 5 steps")
    print(f"- load average at start: {open('/proc/loadavg').read().split()[0]}\n")
    if KILL_AFTER:
        return sweep()
    results = {}
    for case in ("recovery", "cold") if COLD == "1" else ("recovery",):
        # (cold: the same process start as the first kind, skipped; not so the plain and the
        # prestarted script, whose pre-started interpreters import torch beside the workers.)
        kinds = [k for k in KINDS
                 if not (case == "cold" and ("old way" in k or "new process" in k))]
        # One warm-up run of each kind, not counted (page cache, .pyc files), then the kinds take
        # turns run by run, each run on an idle machine, so that a drift of the machine's speed
        # reaches every kind.
        for kind in kinds:
            progress(f"{case} {kind} warm-up run (not counted)")
            one_run(kind, case, -1)
        for kind in kinds:
            results[(case, kind)] = ([], [])
        for i in range(RUNS):
            for kind in kinds:
                wait_quiet(QUIET_WAIT, progress)
                progress(f"{case} {kind} run {i + 1}/{RUNS}")
                t, l = one_run(kind, case, i)
                # Each run's figures as they come: a run cut off by a time limit keeps them.
                progress(f"{case} {kind} run {i + 1}: "
                         + ("no step seen" if t is None else f"{t:.2f} s")
                         + ("" if l is None else f", {l} completed step(s) lost"))
                results[(case, kind)][0].append(t)
                results[(case, kind)][1].append(l)
    def row(kind, case):
        times, lost = results[(case, kind)]
        m = med(times)
        runs = ", ".join("—" if t is None else f"{t:.2f}" for t in times)
        extra = f" {lost} |" if case == "recovery" else ""
        return f"| {kind} | {'—' if m is None else f'{m:.2f} s'} | {runs} |{extra}"

    def ratio(case, label, mine_kind=MINE):
        ref = med(results[(case, REF)][0])
        mine = med(results[(case, mine_kind)][0])
        if ref and mine:
            print(f"\n{label}: {REF} / {mine_kind} = {ref / mine:.1f}x")

    print(f"| SIGKILL of rank {KILL_RANK} -> first step after it | median | runs | completed steps lost "
          "(per run) |")
    print("|---|---|---|---|")
    for kind in KINDS:
        print(row(kind, "recovery"))
    ratio("recovery", "Recovery")
    if SCRIPT != "trainer":
        for kind in KINDS[1:-1]:
            ratio("recovery", "Recovery", kind)
    # Run by run (the kinds took turns, so run i of each saw the same machine): the worst pair,
    # and the slowest run against the reference's fastest, for a target "in every run".
    ref_times = results[("recovery", REF)][0]
    for kind in KINDS[:-1]:
        pairs = [(r, t) for r, t in zip(ref_times, results[("recovery", kind)][0]) if r and t]
        if pairs:
            print(f"\n{REF} / {kind}, run by run: "
                  + ", ".join(f"{r / t:.2f}x" for r, t in pairs)
                  + f"; worst {min(r / t for r, t in pairs):.2f}x; the reference's fastest run over "
                  f"this kind's slowest: {min(r for r, _ in pairs) / max(t for _, t in pairs):.2f}x")
    print(f"\nRuns that waited for an idle machine: {busy_waits['waited']}; that ran on a busy "
          f"one after {QUIET_WAIT:.0f} s: {busy_waits['gave_up']} (up to "
          f"{busy_waits['worst']:.0%} of the CPU)")
    if memory:
        print(f"\nA warm standby's resident memory: {med([m[0] for m in memory]):.0f} MiB "
              f"(a training worker: {med([m[1] for m in memory]):.0f} MiB), medians of "
              f"{len(memory)} runs")
    for kind, found in phases.items():
        names = OUTSIDE_PHASES if "ddp_resnet" in kind else PHASES
        whose = ("seen from outside: a new rank-0 process, then rank 0's records"
                 if "ddp_resnet" in kind else "the trainer's recovery record, rank 0's view")
        print(f"\nWhere {kind}'s recovery went ({whose}; medians of {len(found)} runs): "
              + ", ".join(f"{p} {med([f.get(p) for f in found]):.2f} s" for p in names
                          if med([f.get(p) for f in found]) is not None))
    kept_phases = {"order": [], "runs": {}}
    for kind, found in phases.items():
        kept_phases["order"] = list(OUTSIDE_PHASES if "ddp_resnet" in kind else PHASES)
        kept_phases["runs"][kind] = found
    keep(f"recovery-{SCRIPT}",
         [{"case": "a rank SIGKILLed to the next training step",
           "samples": {kind: results[("recovery", kind)][0] for kind in KINDS}}],
         command_line(), "s", f"{NPROC} workers; the killed rank: {KILL_RANK}",
         kept_phases if kept_phases["runs"] else None)
    if COLD == "1":
        print("\n| launch -> first training step (cold) | median | runs |")
        print("|---|---|---|")
        for kind in KINDS:
            if ("cold", kind) in results:
                print(row(kind, "cold"))
        ratio("cold", "Cold start")
        for kind in KINDS[1:-1]:
            if ("cold", kind) in results:
                ratio("cold", "Cold start", kind)

def sweep():
    """KILL_AFTER: every kind killed at each time after its first step, RUNS times, interleaved
    (SCRIPT=elastic's "new process" kind is left out: the sweep is about the standby)."""
    kinds = [k for k in KINDS if "new process" not in k]
    results = {}
    for after in KILL_AFTER:
        for i in range(RUNS):
            for kind in kinds:
                print(f"recovery: kill {after:g} s after the first step, {kind}, run {i + 1}/{RUNS}",
                      file=sys.stderr, flush=True)
                t, l = one_run(kind, "recovery", i, kill_after=after)
                print(f"recovery: kill {after:g} s, {kind}, run {i + 1}: "
                      + ("no step seen" if t is None else f"{t:.2f} s")
                      + ("" if l is None else f", {l} completed step(s) lost"),
                      file=sys.stderr, flush=True)
                results.setdefault((after, kind), []).append((t, l))
    print(f"| SIGKILL of rank {KILL_RANK}, s after the first step | launcher | kill -> first step "
          "after it, median | runs | completed steps lost (per run) |")
    print("|---|---|---|---|---|")
    for after in KILL_AFTER:
        for kind in kinds:
            found = results[(after, kind)]
            m = med([t for t, _ in found])
            runs = ", ".join("—" if t is None else f"{t:.2f}" for t, _ in found)
            print(f"| {after:g} | {kind} | {'—' if m is None else f'{m:.2f} s'} | {runs} | "
                  f"{[l for _, l in found]} |")
    print()
    for after in KILL_AFTER:
        mine = [t for t, _ in results[(after, MINE)]]
        ref = [t for t, _ in results[(after, REF)]]
        if None in mine or None in ref:
            print(f"- {after:g} s: a run saw no step after the kill")
            continue
        print(f"- {after:g} s: {MINE} median {med(mine):.2f} s (slowest {max(mine):.2f} s), "
              f"{REF} median {med(ref):.2f} s (fastest {min(ref):.2f} s): "
              f"{med(ref) / med(mine):.1f}x; "
              + ("never slower" if max(mine) <= min(ref) else "slower in some pairing of runs"))
    print("\nLaunch to the first step in these runs (the standby, if any, starting beside the "
          "workers): " + "; ".join(f"{kind} {med(found):.2f} s" for kind, found in startup.items()))


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        main()
    finally:
        shutil.rmtree(WORK, ignore_errors=True)
