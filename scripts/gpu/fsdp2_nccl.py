#!/usr/bin/env python3
"""Sharded in-process recovery on this machine's GPUs (scripts/gpu/run-all.sh, step fsdp2-nccl):
scripts/examples/fsdp2.py, FSDP2 over NCCL, one worker per GPU, in three runs:

  undisturbed   under mxrun, then under torchrun (where mxrun.run is one plain round): both end
                0 and every rank ends with the same shards and optimizer state under both
                (SHA-256 per rank), with the median step time of each
  killed        (2 GPUs or more) under mxrun --max_restarts=1, the last rank SIGKILLs itself
                after the forward of step KILL_STEP: its new process gets its shards from the
                ring neighbour's host copy, the others keep theirs; 0 steps redone and every
                rank bit for bit as undisturbed. With one GPU there is no peer to keep a copy
                (NCCL takes one rank per GPU): reported as skipped.

Markdown on stdout; the last line is the step's figure. Exit 1 when a check fails.
Environment: PY, MXRUN, TORCHRUN, ROOT, NPROC, DEVICE (cpu runs the same on 2 CPU ranks with
Gloo) and TIMEOUT as scripts/gpu/gpu_jobs.py says; STEPS (default 60), KILL_STEP (default 30).
"""
import os
import re
import sys
import time

from gpu_jobs import DEVICE, ROOT, launch, median_step, nproc, stderr_tail

STEPS = int(os.environ.get("STEPS", "60"))
KILL_STEP = int(os.environ.get("KILL_STEP", "30"))
SCRIPT = os.path.join(ROOT, "scripts/examples/fsdp2.py")


def run(launcher, n, extra=()):
    return launch(launcher, n, [SCRIPT, "--device", DEVICE, "--steps", str(STEPS), *extra])


def digests(records):
    return {r["rank"]: r["state_sha256"] for r in records if r["event"] == "done"}


def main():
    n = nproc()
    if n < 1:
        print("fsdp2-nccl: no GPU that torch sees")
        return 1
    failures = []
    print(f"### Sharded recovery over NCCL: fsdp2.py on {n} {DEVICE} worker(s)\n")
    base, medians = {}, {}
    for launcher in ("mxrun", "torchrun"):
        t0 = time.time()
        rc, records, err = run(launcher, n)
        base[launcher], medians[launcher] = digests(records), median_step(records)
        steps = [r["step"] for r in records if r["event"] == "step"]
        print(f"- undisturbed under {launcher}: exit {rc}, {len(steps)} steps, "
              f"{len(base[launcher])} ranks done, median step "
              f"{1000 * (medians[launcher] or 0):.2f} ms, {time.time() - t0:.0f} s")
        if rc != 0 or len(base[launcher]) != n or len(steps) != STEPS:
            failures.append(f"undisturbed under {launcher}")
            print(stderr_tail(err, 5))
    same = base["mxrun"] == base["torchrun"] and len(base["mxrun"]) == n
    print(f"- shards and optimizer state, rank by rank, mxrun against torchrun: "
          f"{'equal' if same else 'DIFFER'}")
    if not same:
        failures.append("mxrun against torchrun")
    kill = "skipped (one GPU: no peer keeps a copy)"
    if n >= 2:
        victim = n - 1
        rc, records, err = run("mxrun", n, ["--kill_rank", str(victim), "--kill_step",
                                            str(KILL_STEP), "--kill_after_forward"])
        steps = [r["step"] for r in records if r["event"] == "step"]
        rounds = [r for r in records if r["event"] == "round" and r["from_step"] > 0]
        how = ", ".join(sorted({r["restored_from"] for r in rounds})) or "none"
        bitwise = digests(records) == base["mxrun"] and len(base["mxrun"]) == n
        redone = len(steps) - len(set(steps))
        first = re.search(r"in-process restart 1 .*?first step ([0-9.]+) s", err.replace("\n", " "))
        kill = (f"resumed from {how}, {redone} steps redone, "
                f"{'bitwise as undisturbed' if bitwise else 'NOT bitwise as undisturbed'}, first "
                f"step after the kill {first[1] + ' s' if first else 'unknown'}")
        print(f"- rank {victim} SIGKILLed after the forward of step {KILL_STEP} under mxrun: "
              f"exit {rc}, {kill}")
        if rc != 0 or how != "memory" or redone or not bitwise:
            failures.append("the kill")
            print(stderr_tail(err, 8))
    ratio = (medians["mxrun"] / medians["torchrun"]) if all(medians.values()) else None
    print(f"\n{'; '.join(failures) + ' FAILED' if failures else 'all checks passed'}; median "
          f"step under mxrun / torchrun: " + (f"{ratio:.3f}" if ratio else "unknown")
          + f"; kill: {kill}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
