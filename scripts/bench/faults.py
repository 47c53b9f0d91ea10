#!/usr/bin/env python3
"""The network-fault suite's figures: runs build/bin/mxrun_fault_tests RUNS times (default 3) and
prints, for each fault, what mxrun did and the medians of the times each case measured (the
"fault suite:" lines the tests print). The cases in network namespaces need root; where they
cannot run, the table says so. Nothing is left running: every case checks that itself.

Environment: RUNS (default 3), FAULT_TESTS (default <repo>/build/bin/mxrun_fault_tests);
faults.sh runs it with $PYTHON (default python3). Markdown on stdout, progress on stderr; the exit
status is 1 when a run of the suite failed (its log's end goes to stderr).
"""
import glob
import os
import re
import shutil
import statistics
import subprocess
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_common import (REPO, die, env, executable, git_rev, is_whole, loadavg,  # noqa: E402
                          make_workdir, nproc, run_main, utc_now)

SCRIPT = "faults.sh"
RUNS_S = env("RUNS", "3")
FAULT_TESTS = env("FAULT_TESTS", os.path.join(REPO, "build/bin/mxrun_fault_tests"))
if not is_whole(RUNS_S) or int(RUNS_S) == 0:
    die(SCRIPT, "RUNS must be a positive integer")
if not executable(FAULT_TESTS):
    die(SCRIPT, f"not found or not executable: {FAULT_TESTS} (build: cd build && ninja "
        "mxrun_fault_tests)")
RUNS = int(RUNS_S)
WORK = make_workdir("mxrun-faults.")


def table(work, runs):
    cases = {}  # text with numbers replaced by {} -> list of number lists
    skipped = False
    for path in sorted(glob.glob(os.path.join(work, "run*.log"))):
        text = open(path, errors="replace").read()
        skipped = skipped or "fault suite skipped" in text
        for line in text.splitlines():
            if not line.startswith("fault suite: "):
                continue
            body = line[len("fault suite: "):]
            numbers = [float(x) for x in re.findall(r"\d+\.\d+", body)]
            key = re.sub(r"\d+\.\d+", "{}", body)
            cases.setdefault(key, []).append(numbers)
    print("| fault | what mxrun did (medians of %d runs; nothing lost, nothing left running) | runs |"
          % runs)
    print("|---|---|---:|")
    for key, values in cases.items():
        fault, _, what = key.partition(": ")
        med = [statistics.median(v[i] for v in values) for i in range(len(values[0]))]
        print(f"| {fault} | {what.format(*[f'{m:.2f}' for m in med])} | {len(values)} |")
    if skipped:
        print()
        print("The network-namespace cases were skipped here (see the log for why).")


def main():
    print("## The network-fault suite")
    print()
    print(f"- command: `RUNS={RUNS_S} scripts/bench/faults.sh`")
    print(f"- date: {utc_now()}; nproc={nproc()}; repo at {git_rev(mark_modified=False)}")
    print(f"- load average at start: {loadavg()}")
    print(flush=True)
    status = 0
    for i in range(1, RUNS + 1):
        log = os.path.join(WORK, f"run{i}.log")
        with open(log, "wb") as out:
            rc = subprocess.run([FAULT_TESTS], stdout=out, stderr=subprocess.STDOUT).returncode
        if rc != 0:
            with open(log, errors="replace") as f:
                end = "".join(f.readlines()[-40:])
            print(f"{SCRIPT}: run {i} failed; its log:\n{end}", file=sys.stderr, end="", flush=True)
            status = 1
        print(f"{SCRIPT}: run {i} of {RUNS} done", file=sys.stderr, flush=True)
    table(WORK, RUNS)
    return status


if __name__ == "__main__":
    run_main(main, lambda: shutil.rmtree(WORK, ignore_errors=True))
