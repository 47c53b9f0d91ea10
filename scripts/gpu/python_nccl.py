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
Environment: PY, MXRUN, TORCHRUN, ROOT, NPROC, DEVICE (cpu runs the same on 2 CPU ranks with
Gloo) and TIMEOUT as scripts/gpu/gpu_jobs.py says; STEPS (default 300), KILL_STEP (default 100).
"""
import os
import sys
import tempfile
import time

from gpu_jobs import DEVICE, ROOT, launch, median_step, nproc, stderr_tail

STEPS = int(os.environ.get("STEPS", "300"))
KILL_STEP = int(os.environ.get("KILL_STEP", "100"))
SCRIPT = os.path.join(ROOT, "scripts/examples/elastic_ddp.py")


def run(launcher, n, work, extra=()):
    ckpt = tempfile.mkdtemp(dir=work, prefix="ckpt.")
    return launch(launcher, n, [SCRIPT, "--device", DEVICE, "--steps", str(STEPS), "--ckpt_dir",
                                ckpt, "--ckpt_every", "50", *extra])


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
        medians[launcher] = median_step(records)
        ok = rc == 0 and len(params) == n and len(set(params.values())) == 1 and len(steps) == STEPS
        print(f"- undisturbed under {launcher}: exit {rc}, {len(steps)} steps, {len(params)} ranks "
              f"done, parameters {'equal' if len(set(params.values())) == 1 else 'DIFFER'}, "
              f"median step {1000 * (medians[launcher] or 0):.2f} ms, {time.time() - t0:.0f} s")
        if not ok:
            failures.append(f"undisturbed under {launcher}")
            print(stderr_tail(err, 5))
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
        print(stderr_tail(err, 8))
    if expected_once and "memory" not in how:
        failures.append("the survivors' state")
    ratio = (medians["mxrun"] / medians["torchrun"]) if all(medians.values()) else None
    print(f"\n{'; '.join(failures) + ' FAILED' if failures else 'all checks passed'}; median "
          f"step under mxrun / torchrun: " + (f"{ratio:.3f}" if ratio else "unknown")
          + f"; kill: {how}, step gap {gap if gap is None else round(gap, 2)} s")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
