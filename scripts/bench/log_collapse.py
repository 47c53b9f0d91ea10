#!/usr/bin/env python3
"""One line instead of world-size copies (issue 37, item 2), measured: N workers (default 64) print
the same warning at the same moment, then a line stamped with the time it was printed. Per
launcher, how many copies of the warning reach the console, and how long each stamped line took
from the worker's print to the launcher's stdout (its delay), side by side:

  mxrun            the default --log_collapse_window (0.5 s)
  mxrun, window 0  --log_collapse_window=0 (every copy at once)
  torchrun         torchrun 2.13 (its workers write to the console directly)

All three run `LAUNCHER --standalone --nproc_per_node=N --no_python PYTHON worker.py T`,
interleaved run by run (RUNS, default 5), the launcher's stdout read through a pipe and each line
timed on arrival. Environment: N, RUNS, MXRUN, TORCHRUN, PYTHON (the workers' interpreter, default
the venv's), QUIET_WAIT. Markdown on stdout, progress on stderr.
"""
import os
import shutil
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_common import (DEFAULT_MXRUN, DEFAULT_PYTHON, DEFAULT_TORCHRUN, Log, detect_env,
                          env, machine, make_workdir, median, private_copy, run_main,
                          signal_group, utc_now, version_line, wait_quiet)

N = int(env("N", "64"))
RUNS = int(env("RUNS", "5"))
QUIET_WAIT = float(env("QUIET_WAIT", "60"))
MXRUN = env("MXRUN", DEFAULT_MXRUN)
TORCHRUN = env("TORCHRUN", DEFAULT_TORCHRUN)
PYTHON = env("PYTHON", DEFAULT_PYTHON)
WARNING = "UserWarning: this is deprecated"
START_AFTER = 6.0  # seconds: every worker has started by then (N interpreters on this machine)
LINGER = 2.0       # seconds the workers run on after their lines (mxrun lets pending lines out
                   # when the workers end: without it the window would not show)

WORKER = f'''import os, sys, time
time.sleep(max(0.0, float(sys.argv[1]) - time.time()))
print({WARNING!r}, flush=True)
print(f"stamp {{time.time():.6f}} rank {{os.environ['RANK']}}", flush=True)
time.sleep({LINGER})  # still running: the line waits its window, not the workers' exit
'''

log = Log("log_collapse")
WORK = make_workdir("mxrun-bench-collapse-")


def one_run(base):
    """(copies of the warning on the console, [delay of each stamped line in s]) or None."""
    worker = os.path.join(WORK, "worker.py")
    at = time.time() + START_AFTER
    cmd = base + ["--standalone", f"--nproc_per_node={N}", "--no_python", PYTHON, worker,
                  f"{at:.6f}"]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                         stdin=subprocess.DEVNULL, start_new_session=True)
    lines = []

    def read():
        for raw in p.stdout:
            lines.append((time.time(), raw.decode(errors="replace")))

    reader = threading.Thread(target=read)
    reader.start()
    try:
        rc = p.wait(timeout=120)
    except subprocess.TimeoutExpired:
        signal_group(p.pid)
        p.wait()
        log.warn(f"{base[0]}: no exit within 120 s")
        return None
    finally:
        reader.join(timeout=10)
    if rc != 0:
        log.warn(f"{' '.join(base)}: exit code {rc}")
        return None
    copies = sum(1 for _, text in lines if WARNING in text)
    delays = []
    for arrived, text in lines:
        if "stamp " in text:
            delays.append(arrived - float(text.split("stamp ", 1)[1].split()[0]))
    if len(delays) != N or copies not in (1, N):
        log.warn(f"{' '.join(base)}: {len(delays)} stamped lines of {N}, {copies} copies of the "
                 f"warning; lines that were neither: "
                 f"{[t for _, t in lines if WARNING not in t and 'stamp ' not in t][:3]}")
    return copies, delays


def main():
    with open(os.path.join(WORK, "worker.py"), "w") as f:
        f.write(WORKER)
    mxrun = private_copy(MXRUN, os.path.join(WORK, "mxrun"))
    launchers = {
        "mxrun": [mxrun],
        "mxrun, window 0": [mxrun, "--log_collapse_window=0"],
        "torchrun": [TORCHRUN],
    }
    found = {name: {"copies": [], "delays": [], "max": [], "lost": 0} for name in launchers}
    for i in range(RUNS + 1):  # the first round warms up, not counted
        wait_quiet(QUIET_WAIT, log.progress)
        for name, base in launchers.items():
            result = one_run(base)
            if result is None or i == 0:
                continue
            copies, delays = result
            found[name]["copies"].append(copies)
            found[name]["delays"].extend(delays)
            found[name]["max"].append(max(delays) if delays else float("nan"))
            found[name]["lost"] += N - len(delays)
        log.progress(f"round {i} of {RUNS} done")
    e = detect_env(TORCHRUN, PYTHON)
    print("## One line instead of world-size copies\n")
    print(f"- command: `N={N} RUNS={RUNS} scripts/bench/log_collapse.sh`")
    print(f"- date: {utc_now()}; machine: {machine(e.cpu_model)}; repo at {e.git_rev}")
    print(f"- mxrun: {version_line(mxrun)}; torchrun: {TORCHRUN}; workers: {PYTHON}")
    print(f"- {N} workers print `{WARNING}` at the same moment, then a line stamped with its "
          "print time; delay: from that print to the line on the launcher's stdout (a pipe)")
    print(f"- {RUNS} runs per launcher after a warm-up round, interleaved\n")
    print("| launcher | copies of the warning (median) | delay per line, median (ms) | "
          "delay, the largest of any run (ms) | stamped lines missing or broken, all runs |")
    print("|---|---:|---:|---:|---:|")
    for name, f in found.items():
        copies = median(f["copies"])
        print(f"| {name} | {copies:.0f} | {median(f['delays']) * 1000:.1f} | "
              f"{max(f['max'], default=float('nan')) * 1000:.1f} | {f['lost']} of {N * RUNS} |")
    if log.problems:
        print("\nProblems:\n")
        for problem in log.problems:
            print(f"- {problem}")
    return 0


if __name__ == "__main__":
    run_main(main, cleanup=lambda: shutil.rmtree(WORK, ignore_errors=True))
