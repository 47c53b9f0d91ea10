"""Goodput of unmodified framework jobs under mxrun, against the value their own logs give
(issue 56's target: within 2 points). The jobs are tests/python/frameworks/ (Lightning, the
Hugging Face Trainer, Accelerate; nothing of mxrun in them), 2 CPU workers, --steps STEPS, a
checkpoint every 5 steps, rank 1 SIGKILLed after step KILL_STEP in the first attempt and the job
restarted from its checkpoint. The workers see the wheel's .pth and entry points through a site
folder made here, as after `pip install mxrun`.

From rank 0's own records (each step's wall-clock time): a step's time is the median gap between
two consecutive steps of one attempt; the useful training is STEPS such steps (every step once);
the steps redone are the first attempt's last step minus the checkpoint the second began from;
the job's wall time is measured here, launch to exit. Log goodput = useful training / wall.
mxrun's is its goodput line's. Environment: RUNS (3), STEPS (60), KILL_STEP (37), STEP_SLEEP
(0.05: seconds each step sleeps, beside its compute), JOBS (lightning,hf_trainer,accelerate),
MXRUN (build/bin/mxrun). Markdown on stdout.
"""
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_common import (DEFAULT_MXRUN, REPO, die, env, executable, is_whole, kill_tree,  # noqa
                          loadavg, machine, cpu_model, utc_now, git_rev)

SCRIPT = "frameworks_goodput.py"
FRAMEWORKS = os.path.join(REPO, "tests/python/frameworks")
ALL_JOBS = ("lightning", "hf_trainer", "accelerate")
RUNS_S, STEPS_S, KILL_S = env("RUNS", "3"), env("STEPS", "60"), env("KILL_STEP", "37")
SLEEP_S = env("STEP_SLEEP", "0.05")
JOBS = env("JOBS", ",".join(ALL_JOBS)).split(",")
MXRUN = env("MXRUN", DEFAULT_MXRUN)
for name, text in (("RUNS", RUNS_S), ("STEPS", STEPS_S), ("KILL_STEP", KILL_S)):
    if not is_whole(text) or int(text) < 1:
        die(SCRIPT, f"{name} must be a whole number >= 1, not '{text}'")
RUNS, STEPS, KILL_STEP = int(RUNS_S), int(STEPS_S), int(KILL_S)
if not 5 < KILL_STEP < STEPS:
    die(SCRIPT, f"KILL_STEP must lie between 5 and STEPS ({STEPS}), not {KILL_STEP}")
try:
    STEP_SLEEP = float(SLEEP_S)
except ValueError:
    STEP_SLEEP = -1
if not 0 <= STEP_SLEEP <= 10:
    die(SCRIPT, f"STEP_SLEEP must be seconds from 0 to 10, not '{SLEEP_S}'")
if set(JOBS) - set(ALL_JOBS):
    die(SCRIPT, f"unknown JOBS {sorted(set(JOBS) - set(ALL_JOBS))}; accepted: "
        + ", ".join(ALL_JOBS))
if not executable(MXRUN):
    die(SCRIPT, f"mxrun not found or not executable: {MXRUN}")
GOODPUT = re.compile(r"goodput ([0-9.]+)%: ([0-9.]+) s wall, ([0-9.]+) s training, .*"
                     r"\(([0-9]+) steps redone\)")
WORK = tempfile.mkdtemp(prefix="mxrun-bench-frameworks.")


def make_site():
    site = os.path.join(WORK, "site")
    info = os.path.join(site, "mxrun_bench-0.dist-info")
    os.makedirs(info)
    shutil.copy(os.path.join(REPO, "python/mxrun-auto-progress.pth"), site)
    shutil.copy(os.path.join(REPO, "python/entry_points.txt"), info)
    with open(os.path.join(info, "METADATA"), "w") as f:
        f.write("Metadata-Version: 2.1\nName: mxrun-bench\nVersion: 0\n")
    return site


def one_run(job, site):
    ckpt = tempfile.mkdtemp(dir=WORK, prefix=f"{job}.")
    cmd = [MXRUN, "--standalone", "--nproc_per_node=2", "--max_restarts=1",
           os.path.join(FRAMEWORKS, "with_site.py"), os.path.join(FRAMEWORKS, f"{job}_job.py"),
           "--ckpt_dir", ckpt, "--steps", str(STEPS), "--kill_rank", "1", "--kill_step",
           str(KILL_STEP), "--step_sleep", SLEEP_S]
    e = dict(os.environ, MXRUN_TEST_SITE=site, PYTHON_EXEC=os.path.join(REPO, ".venv/bin/python3"),
             PYTHONPATH=os.path.join(REPO, "python"))
    start = time.monotonic()
    p = subprocess.Popen(cmd, env=e, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        out, err = p.communicate(timeout=300)
    except subprocess.TimeoutExpired:
        kill_tree(p.pid)
        p.communicate()
        return None
    wall = time.monotonic() - start
    m = GOODPUT.search(err)
    if p.returncode != 0 or m is None:
        print(f"{SCRIPT}: {job}: exit {p.returncode}, no goodput line", file=sys.stderr)
        return None
    attempts = []
    for line in out.splitlines():
        i = line.find('] {"event"')
        if not line.startswith("[n0 r0]") or i < 0:
            continue
        r = json.loads(line[i + 2:])
        if r["event"] == "fit_start":
            attempts.append({"from": r["global_step"], "steps": []})
        elif r["event"] == "step" and attempts:
            attempts[-1]["steps"].append((r["global_step"], r["time"]))
    if len(attempts) != 2:
        return None
    gaps = [b[1] - a[1] for att in attempts for a, b in zip(att["steps"], att["steps"][1:])
            if b[0] == a[0] + 1]
    step = statistics.median(gaps)
    redone = attempts[0]["steps"][-1][0] - attempts[1]["from"]
    return {"log": 100 * STEPS * step / wall, "mxrun": float(m.group(1)),
            "redone_log": redone, "redone_mxrun": int(m.group(4)), "wall": wall, "step": step}


def main():
    site = make_site()
    print("## Goodput of unmodified framework jobs: mxrun's line against their own logs")
    print()
    print(f"- command: `RUNS={RUNS} STEPS={STEPS} KILL_STEP={KILL_STEP} STEP_SLEEP={SLEEP_S} "
          f"JOBS={','.join(JOBS)} scripts/bench/frameworks_goodput.sh`")
    print(f"- date: {utc_now()}; {machine(cpu_model())}; repo at {git_rev()}; load average at "
          f"start: {loadavg()}")
    print()
    print("| job | run | wall (s) | step (s) | goodput, from the log | goodput, mxrun | "
          "difference (points) | steps redone, log | steps redone, mxrun |")
    print("|---|---|---|---|---|---|---|---|---|")
    worst = 0.0
    for job in JOBS:
        for i in range(RUNS):
            r = one_run(job, site)
            if r is None:
                print(f"| {job} | {i + 1} | failed | | | | | | |")
                continue
            diff = r["mxrun"] - r["log"]
            worst = max(worst, abs(diff))
            print(f"| {job} | {i + 1} | {r['wall']:.1f} | {r['step']:.3f} | {r['log']:.1f}% | "
                  f"{r['mxrun']:.1f}% | {diff:+.1f} | {r['redone_log']} | {r['redone_mxrun']} |",
                  flush=True)
    print()
    print(f"Largest difference: {worst:.1f} points (target: within 2).")


if __name__ == "__main__":
    try:
        main()
    finally:
        shutil.rmtree(WORK, ignore_errors=True)
