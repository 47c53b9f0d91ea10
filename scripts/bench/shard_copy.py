#!/usr/bin/env python3
"""FSDP2's redundant copy (python/mxrun/_shard_copy.py, issue 55), measured on
scripts/examples/fsdp2.py (2 CPU ranks, Gloo, its default model) side by side in one run, RUNS
times each, interleaved:

- the step time under mxrun with the copy at every step (MXRUN_SHARD_COPY_EVERY=1, the default),
  every 4 steps, without it (MXRUN_SHARD_COPY_EVERY=1000000000: one image at the round's start only), and under
  torchrun 2.13 (no mxrun at all); the median over steps 6 to STEPS of the time between rank 0's
  step lines, then the median over runs; the copy's overhead against no copy;
- the copy's own line (mxrun prints it as a round ends): MB per exchange, its median time off the
  loop's path, the host memory it holds;
- recovery: rank 1 SIGKILLed after the forward of step 21 with a ready warm standby
  (--standby_workers=1): mxrun's restart line (time to the first step after it), the steps
  logged twice, and whether every rank ended bit for bit as the undisturbed run.

Environment: RUNS (default 3), STEPS (default 40), MXRUN, TORCHRUN, PYTHON, QUIET_WAIT. Markdown on
stdout, progress on stderr.
"""
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_common import (DEFAULT_MXRUN, DEFAULT_PYTHON, DEFAULT_TORCHRUN, REPO, Log, detect_env,
                          env, machine, median, print_problems, run_main, utc_now, version_line,
                          wait_quiet)

RUNS = int(env("RUNS", "3"))
STEPS = int(env("STEPS", "40"))
QUIET_WAIT = float(env("QUIET_WAIT", "60"))
MXRUN = env("MXRUN", DEFAULT_MXRUN)
TORCHRUN = env("TORCHRUN", DEFAULT_TORCHRUN)
PYTHON = env("PYTHON", DEFAULT_PYTHON)
SCRIPT = os.path.join(REPO, "scripts/examples/fsdp2.py")
log = Log("shard_copy")


def run(argv, extra_env=None, timeout=600):
    e = dict(os.environ, PYTHON_EXEC=PYTHON, PYTHONPATH=os.path.join(REPO, "python"),
             OMP_NUM_THREADS="1")
    e.update(extra_env or {})
    r = subprocess.run(argv, env=e, capture_output=True, text=True, timeout=timeout)
    if r.returncode != 0:
        log.warn(f"{' '.join(argv[:4])} ... exited {r.returncode}: {r.stderr[-400:]}")
    return r


def step_times(out):
    """{step: time} of rank 0's step lines (the last of each step)."""
    times = {}
    for m in re.finditer(r'\{"event": "step", "step": ([0-9]+), "time": ([0-9.]+)', out):
        times[int(m[1])] = float(m[2])
    return times


def median_step(out):
    t = step_times(out)
    gaps = [t[s] - t[s - 1] for s in range(7, STEPS + 1) if s in t and s - 1 in t]
    return median(gaps) if gaps else float("nan")


def digests(out):
    return {int(m[1]): m[2] for m in re.finditer(
        r'\{"event": "done", "rank": ([0-9]+), "state_sha256": "([0-9a-f]{64})"', out)}


def main():
    mx = [MXRUN, "--standalone", "--nproc_per_node=2", SCRIPT, "--steps", str(STEPS)]
    tr = [TORCHRUN, "--standalone", "--nproc_per_node=2", SCRIPT, "--steps", str(STEPS)]
    kinds = {"mxrun, copy every step": (mx, {"MXRUN_SHARD_COPY_EVERY": "1"}),
             "mxrun, copy every 4 steps": (mx, {"MXRUN_SHARD_COPY_EVERY": "4"}),
             "mxrun, no copy": (mx, {"MXRUN_SHARD_COPY_EVERY": "1000000000"}),
             "torchrun 2.13": (tr, {})}
    steps = {k: [] for k in kinds}
    copy_lines = []
    base_digests = None
    for i in range(RUNS):
        for kind, (argv, extra) in kinds.items():
            wait_quiet(QUIET_WAIT, log.progress)
            log.progress(f"run {i + 1}/{RUNS}: {kind}")
            r = run(argv, extra)
            steps[kind].append(median_step(r.stdout))
            if kind == "mxrun, copy every step":
                copy_lines += re.findall(r"shard copy: .*", r.stderr)
                base_digests = base_digests or digests(r.stdout)
    recoveries = []
    for i in range(RUNS):
        wait_quiet(QUIET_WAIT, log.progress)
        log.progress(f"recovery {i + 1}/{RUNS}")
        r = run([MXRUN, "--standalone", "--nproc_per_node=2", "--max_restarts=1",
                 "--standby_workers=1", SCRIPT, "--steps", str(STEPS), "--kill_rank", "1",
                 "--kill_step", "21", "--kill_after_forward", "--step_sleep", "0.3"])
        m = re.search(r"in-process restart 1 .*?first step ([0-9.]+) s; ([0-9.]+) s in all",
                      r.stderr.replace("\n", " "))
        counts = {}
        for s in re.findall(r'"event": "step", "step": ([0-9]+),', r.stdout):
            counts[s] = counts.get(s, 0) + 1
        recoveries.append({
            "first_step": float(m[1]) if m else float("nan"),
            "standby": bool(re.search(r"standby pid", r.stderr)),
            "redone": sum(c - 1 for c in counts.values()),
            "bitwise": digests(r.stdout) == base_digests and bool(base_digests)})
    copy_ms = [float(x) for x in re.findall(r"median ([0-9.]+) ms", " ".join(copy_lines))]
    each_mb = [float(x) for x in re.findall(r"([0-9.]+) MB each", " ".join(copy_lines))]
    held_mb = [float(x) for x in re.findall(r"([0-9.]+) MB held", " ".join(copy_lines))]
    on, _, off, ref = (median(steps[k]) for k in kinds)
    print(f"# FSDP2's redundant copy ({utc_now()})\n")
    e = detect_env(TORCHRUN, PYTHON)
    print(f"{machine(e.cpu_model)}; workers' PyTorch: {e.torch_py}; commit {e.git_rev}; "
          f"{version_line(MXRUN)}\n")
    print(f"`RUNS={RUNS} STEPS={STEPS} scripts/bench/shard_copy.sh` (scripts/examples/fsdp2.py, "
          "2 CPU ranks, Gloo, its default model)\n")
    print("| run | median step (s) | against no copy |")
    print("|---|---|---|")
    for kind in kinds:
        m = median(steps[kind])
        print(f"| {kind} | {m:.4f} | {m / off:.3f}x |")
    print(f"\nThe copy: {median(each_mb) if each_mb else 0:.2f} MB per rank per exchange, median "
          f"{median(copy_ms) if copy_ms else 0:.1f} ms off the loop's path (the step: {on * 1000:.0f} "
          f"ms), {median(held_mb) if held_mb else 0:.2f} MB held in host memory per rank; overhead "
          f"{(on / off - 1) * 100:+.1f}% of the step time.\n")
    print("| recovery run | first step after the kill (s) | by a standby | steps redone | "
          "bitwise as undisturbed |")
    print("|---|---|---|---|---|")
    for i, rec in enumerate(recoveries, 1):
        print(f"| {i} | {rec['first_step']:.3f} | {rec['standby']} | {rec['redone']} | "
              f"{rec['bitwise']} |")
    print(f"\nMedian first step after the kill: {median([r['first_step'] for r in recoveries]):.3f} s; "
          f"torchrun 2.13 on the same script, for reference, steps in {ref:.4f} s.")
    print_problems(log.problems)


if __name__ == "__main__":
    run_main(main)
