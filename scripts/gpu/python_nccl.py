#!/usr/bin/env python3
"""The mxrun module's NCCL path on this machine's GPUs (scripts/gpu/run-all.sh, step python-nccl):
scripts/examples/elastic_ddp.py, one worker per GPU, NCCL, in three runs:

  undisturbed   under mxrun, then under torchrun (where mxrun.run is one plain round): both end
                0, every rank ends with the same parameters, and the median step time of each
                (mxrun's includes the NCCL path's synchronization before each optimizer step,
                python/mxrun/_nccl.py)
  killed        under mxrun --max_restarts=1, the last rank SIGKILLs itself at step KILL_STEP:
                with 2 GPUs or more the others keep their processes and state (every step logged
                once, the same parameters everywhere); with one GPU nothing survives and the new
                process resumes from the checkpoint (steps after it are redone)

Markdown on stdout; the last line is the step's figure. Exit 1 when a check fails.
Environment: PY (the Python with PyTorch), MXRUN, TORCHRUN, ROOT (the checkout), NPROC (default:
the GPUs torch sees), DEVICE (default cuda; cpu tries the same on the CPU with Gloo), STEPS
(default 300), KILL_STEP (default 100), TIMEOUT (seconds per run, default 150).
"""
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.environ.get("ROOT") or os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
PY = os.environ.get("PY", sys.executable)
MXRUN = os.environ.get("MXRUN", os.path.join(ROOT, "build/bin/mxrun"))
TORCHRUN = os.environ.get("TORCHRUN", os.path.join(os.path.dirname(PY), "torchrun"))
DEVICE = os.environ.get("DEVICE", "cuda")
STEPS = int(os.environ.get("STEPS", "300"))
KILL_STEP = int(os.environ.get("KILL_STEP", "100"))
TIMEOUT = float(os.environ.get("TIMEOUT", "150"))
SCRIPT = os.path.join(ROOT, "scripts/examples/elastic_ddp.py")
RECORD = re.compile(r"(\{\"event\": .*\})\s*$")


def nproc():
    if os.environ.get("NPROC"):
        return int(os.environ["NPROC"])
    if DEVICE == "cpu":
        return 2
    out = subprocess.run([PY, "-c", "import torch; print(torch.cuda.device_count())"],
                         capture_output=True, text=True, timeout=120).stdout.strip()
    return int(out or 0)


def run(launcher, n, work, extra=()):
    ckpt = tempfile.mkdtemp(dir=work, prefix="ckpt.")
    args = [SCRIPT, "--device", DEVICE, "--steps", str(STEPS), "--ckpt_dir", ckpt,
            "--ckpt_every", "50", *extra]
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"), PYTHON_EXEC=PY,
               TORCH_DISABLE_SHARE_RDZV_TCP_STORE="1")
    if launcher == "mxrun":
        argv = [MXRUN, "--standalone", f"--nproc_per_node={n}", "--max_restarts=1", *args]
    else:
        argv = [TORCHRUN, "--standalone", f"--nproc_per_node={n}", "--max_restarts=1", *args]
    try:
        r = subprocess.run(argv, capture_output=True, text=True, timeout=TIMEOUT, env=env,
                           start_new_session=True)
        rc, out, err = r.returncode, r.stdout, r.stderr
    except subprocess.TimeoutExpired as e:
        rc, out, err = "timed out", (e.stdout or b"").decode(), (e.stderr or b"").decode()
    records = []
    for line in out.splitlines():
        m = RECORD.search(line)
        if m:
            try:
                records.append(json.loads(m.group(1)))
            except ValueError:
                pass
    return rc, records, err


def step_times(records):
    times = [r["time"] for r in records if r["event"] == "step"]
    gaps = [b - a for a, b in zip(times, times[1:])]
    return statistics.median(gaps) if gaps else None


def main():
    n = nproc()
    if n < 1:
        print("python-nccl: no GPU that torch sees")
        return 1
    work = tempfile.mkdtemp(prefix="python-nccl.")
    failures = []
    print(f"### The mxrun module's NCCL path: elastic_ddp.py on {n} {DEVICE} worker(s)\n")
    medians = {}
    for launcher in ("mxrun", "torchrun"):
        t0 = time.time()
        rc, records, err = run(launcher, n, work)
        params = {r["rank"]: r["params"] for r in records if r["event"] == "done"}
        steps = [r["step"] for r in records if r["event"] == "step"]
        medians[launcher] = step_times(records)
        ok = rc == 0 and len(params) == n and len(set(params.values())) == 1 and len(steps) == STEPS
        print(f"- undisturbed under {launcher}: exit {rc}, {len(steps)} steps, {len(params)} ranks "
              f"done, parameters {'equal' if len(set(params.values())) == 1 else 'DIFFER'}, "
              f"median step {1000 * (medians[launcher] or 0):.2f} ms, {time.time() - t0:.0f} s")
        if not ok:
            failures.append(f"undisturbed under {launcher}")
            print("  stderr tail: " + " / ".join(err.strip().splitlines()[-5:]))
    victim = n - 1
    rc, records, err = run("mxrun", n, work, ["--kill_rank", str(victim),
                                              "--kill_step", str(KILL_STEP)])
    steps = [r["step"] for r in records if r["event"] == "step"]
    params = {r["rank"]: r["params"] for r in records if r["event"] == "done"}
    rounds = [r for r in records if r["event"] == "round" and r["from_step"] > 0]
    once = len(steps) == len(set(steps)) == STEPS
    # From the last step before the kill to the next step logged, whichever step that is.
    logged = [r for r in records if r["event"] == "step"]
    before = next((i for i, r in enumerate(logged) if r["step"] == KILL_STEP - 1), None)
    gap = (logged[before + 1]["time"] - logged[before]["time"]
           if before is not None and before + 1 < len(logged) else None)
    how = ", ".join(sorted({r["restored_from"] for r in rounds})) or "none"
    print(f"- rank {victim} SIGKILLed at step {KILL_STEP} under mxrun: exit {rc}, "
          f"{len(steps)} step lines ({'each step once' if once else 'some steps twice'}), "
          f"resumed from: {how}, parameters "
          f"{'equal' if len(set(params.values())) == 1 else 'DIFFER'} on {len(params)} ranks, "
          f"step {KILL_STEP - 1} -> the next step logged: "
          + (f"{gap:.2f} s" if gap is not None else "never logged"))
    expected_once = n >= 2  # with one GPU the checkpoint serves, and its later steps are redone
    if rc != 0 or len(params) != n or len(set(params.values())) != 1 or (expected_once and not once):
        failures.append("the kill")
        print("  stderr tail: " + " / ".join(err.strip().splitlines()[-8:]))
    if expected_once and "memory" not in how:
        failures.append("the survivors' state")
    ratio = (medians["mxrun"] / medians["torchrun"]) if all(medians.values()) else None
    print(f"\n{'; '.join(failures) + ' FAILED' if failures else 'all checks passed'}; median "
          f"step under mxrun / torchrun: " + (f"{ratio:.3f}" if ratio else "unknown")
          + f"; kill: {how}, step gap {gap if gap is None else round(gap, 2)} s")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
