#!/usr/bin/env python3
"""Rank 0 late to init_process_group: how long its own call takes once it comes (issue 57).

A 2-rank Gloo job on this machine where global rank 0 sleeps LATE seconds before
`torch.distributed.init_process_group("gloo")` (as a rank 0 that logs in to a tracker or builds a
bigger model does) while rank 1 calls it at once. Each rank prints how long its own call took;
the figure is rank 0's. Side by side in one run, the systems interleaved run by run:

  mxrun           mxrun --standalone: the agent hosts the workers' store, listening all along
  mxrun-rank0     mxrun --standalone --workers_store=rank0: PyTorch's store in rank 0 (mxrun
                  before issue 57): rank 1's client is refused until rank 0 opens it, backs off
  torchrun        torchrun 2.13 --standalone: its agent hosts the store (the reference)

Prints a Markdown table (median, min, max of rank 0's call, and of rank 1's, in seconds) on
stdout; progress on stderr.

Environment: RUNS (default 5), LATE (seconds, default 2), MXRUN (default <repo>/build/bin/mxrun),
TORCHRUN (default <repo>/.venv/bin/torchrun), SYSTEMS (default mxrun,mxrun-rank0,torchrun).
"""
import json
import os
import subprocess
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_common import (DEFAULT_MXRUN, DEFAULT_TORCHRUN, Log, detect_env, die, env,  # noqa: E402
                          executable, is_whole, machine, make_workdir, median, private_copy,
                          run_main, torch_version, utc_now, version_line)

SCRIPT = "late_rank0.sh"
WORKER = r'''
import json, os, time, datetime
import torch.distributed as dist
rank = int(os.environ["RANK"])
if rank == 0:
    time.sleep(float(os.environ["LATE_RANK0"]))
started = time.monotonic()
dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=120))
took = time.monotonic() - started
dist.barrier()
print(json.dumps({"rank": rank, "init_s": took,
                  "agent_store": os.environ.get("TORCHELASTIC_USE_AGENT_STORE")}), flush=True)
dist.destroy_process_group()
'''


def one_run(system, argv, workdir, late, log):
    environ = dict(os.environ, LATE_RANK0=str(late), PYTHON_EXEC=sys.executable)
    r = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, env=environ, timeout=300, cwd=workdir)
    found = {}
    out = r.stdout.decode(errors="replace")
    start = out.find('{"rank"')
    while start >= 0:  # wherever a launcher's prefix or another rank's bytes put it
        record, end = json.JSONDecoder().raw_decode(out, start)
        found[record["rank"]] = record
        start = out.find('{"rank"', end)
    if r.returncode != 0 or set(found) != {0, 1}:
        log.warn(f"{system}: exit {r.returncode}, ranks {sorted(found)}: "
                 f"{r.stderr.decode(errors='replace')[-400:]}")
        return None
    return found


def main():
    log = Log(SCRIPT)
    runs = env("RUNS", "5")
    late = float(env("LATE", "2"))
    if not is_whole(runs) or int(runs) < 1:
        die(SCRIPT, f"RUNS must be a whole number of at least 1, got {runs!r}")
    mxrun_src = env("MXRUN", DEFAULT_MXRUN)
    torchrun = env("TORCHRUN", DEFAULT_TORCHRUN)
    for path in (mxrun_src, torchrun):
        if not executable(path):
            die(SCRIPT, f"not executable: {path}")
    systems = env("SYSTEMS", "mxrun,mxrun-rank0,torchrun").split(",")
    workdir = make_workdir("late-rank0-")
    mxrun = private_copy(mxrun_src, os.path.join(workdir, "mxrun"))
    script = os.path.join(workdir, "worker.py")
    with open(script, "w") as f:
        f.write(WORKER)
    argvs = {
        "mxrun": [mxrun, "--standalone", "--nproc_per_node=2", script],
        "mxrun-rank0": [mxrun, "--standalone", "--nproc_per_node=2", "--workers_store=rank0", script],
        "torchrun": [torchrun, "--standalone", "--nproc_per_node=2", script],
    }
    for system in systems:
        if system not in argvs:
            die(SCRIPT, f"unknown system {system!r}; accepted: {', '.join(argvs)}")
    times = {s: {0: [], 1: []} for s in systems}
    store = {}
    for run in range(int(runs)):
        order = systems[run % len(systems):] + systems[:run % len(systems)]
        for system in order:
            found = one_run(system, argvs[system], workdir, late, log)
            if found is None:
                continue
            for rank in (0, 1):
                times[system][rank].append(found[rank]["init_s"])
            store[system] = found[0]["agent_store"]
            log.progress(f"run {run + 1}/{runs} {system}: rank 0 {found[0]['init_s']:.3f} s, "
                         f"rank 1 {found[1]['init_s']:.3f} s")
    info = detect_env(torchrun, sys.executable)
    print(f"# Rank 0 late by {late:g} s to init_process_group (Gloo, 2 ranks), {utc_now()}")
    print()
    print(f"- command: `RUNS={runs} LATE={late:g} scripts/bench/{SCRIPT}`; mxrun "
          f"{version_line(mxrun)} (git {info.git_rev}), torchrun from {torchrun} "
          f"(torch {torch_version(sys.executable)}); {machine(info.cpu_model)}")
    print()
    print("| system | TORCHELASTIC_USE_AGENT_STORE | rank 0's call, median (min-max) | "
          "rank 1's call, median (min-max) | runs |")
    print("|---|---|---|---|---|")
    for system in systems:
        r0, r1 = times[system][0], times[system][1]
        if not r0:
            print(f"| {system} | - | no run finished | - | 0 |")
            continue
        print(f"| {system} | {store.get(system)} | {median(r0):.3f} s ({min(r0):.3f}-{max(r0):.3f}) | "
              f"{median(r1):.3f} s ({min(r1):.3f}-{max(r1):.3f}) | {len(r0)} |")
    for problem in log.problems:
        print(f"\n- problem: {problem}")
    return 0


if __name__ == "__main__":
    run_main(main)
