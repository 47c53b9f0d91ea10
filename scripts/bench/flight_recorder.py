#!/usr/bin/env python3
"""What PyTorch's flight recorder costs per collective on Gloo (issue 37, item 4), measured: mxrun
turns it on (TORCH_FR_BUFFER_SIZE=2000) unless the user set it. Two workers under mxrun time
ITERS all_reduce calls of a small (1 KiB, latency-bound) and a larger (1 MiB) tensor, and of the
small one in a group of one rank (no peer to wait for: what is left is the call's own cost, where
the recorder's share shows most), with the
recorder off (TORCH_FR_BUFFER_SIZE=0) and on (2000), interleaved run by run (RUNS, default 5).
Reported: the median time per collective, the difference (the recorder's cost per collective) and
the ratio. Also the time to take one rank's dump over MXRUN_FLIGHT_SOCKET with the buffer full.

Environment: RUNS, ITERS (default 2000), MXRUN, PYTHON (the workers' interpreter, default the
venv's), QUIET_WAIT. Markdown on stdout, progress on stderr.
"""
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_common import (DEFAULT_MXRUN, DEFAULT_PYTHON, Log, detect_env, env, machine,
                          make_workdir, median, print_problems, private_copy, run_main, utc_now,
                          version_line, wait_quiet)

RUNS = int(env("RUNS", "5"))
ITERS = int(env("ITERS", "2000"))
QUIET_WAIT = float(env("QUIET_WAIT", "60"))
MXRUN = env("MXRUN", DEFAULT_MXRUN)
PYTHON = env("PYTHON", DEFAULT_PYTHON)
SIZES = {"1 KiB": 256, "1 MiB": 262144}  # float32 elements
ALONE = 0  # the key of the one-rank group's row (1 KiB, no peer)
REPO_PYTHON = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python")

WORKER = '''import os, socket, sys, time, torch, torch.distributed as dist
iters, sizes = int(sys.argv[1]), [int(s) for s in sys.argv[2:]]
dist.init_process_group("gloo")
rank = dist.get_rank()
alone = [dist.new_group([r]) for r in range(dist.get_world_size())][rank]
for numel in sizes:
    t = torch.ones(numel)
    for _ in range(50):
        dist.all_reduce(t)
    dist.barrier()
    start = time.perf_counter()
    for _ in range(iters):
        dist.all_reduce(t)
    took = time.perf_counter() - start
    if rank == 0:
        print(f"per_collective {numel} {took / iters * 1e6:.3f}", flush=True)
# A group of one: no peer to wait for, so what is left is each call's own cost.
t = torch.ones(sizes[0])
for _ in range(50):
    dist.all_reduce(t, group=alone)
start = time.perf_counter()
for _ in range(iters):
    dist.all_reduce(t, group=alone)
if rank == 0:
    print(f"per_collective 0 {(time.perf_counter() - start) / iters * 1e6:.3f}", flush=True)
dist.barrier()
path = os.environ.get("MXRUN_FLIGHT_SOCKET")
if rank == 0 and path and os.environ.get("TORCH_FR_BUFFER_SIZE") != "0":
    from mxrun import _flight_recorder
    _flight_recorder.serve()
    start = time.perf_counter()
    with socket.socket(socket.AF_UNIX) as s:
        s.connect(path)
        s.sendall(b"fr_trace\\n")
        size = 0
        while chunk := s.recv(1 << 20):
            size += len(chunk)
    print(f"dump {(time.perf_counter() - start) * 1000:.1f} {size}", flush=True)
dist.barrier()
dist.destroy_process_group()  # PyTorch 2.13 aborts at exit with a Gloo group left up
'''

log = Log("flight_recorder")
WORK = make_workdir("mxrun-bench-fr-")


def one_run(mxrun, buffer_size):
    """({numel: microseconds per collective}, (dump ms, dump bytes) or None) or None."""
    cmd = [mxrun, "--standalone", "--nproc_per_node=2", "--no_python", PYTHON,
           os.path.join(WORK, "worker.py"), str(ITERS)] + [str(n) for n in SIZES.values()]
    run_env = dict(os.environ, TORCH_FR_BUFFER_SIZE=str(buffer_size),
                   PYTHONPATH=os.path.abspath(REPO_PYTHON))
    p = subprocess.run(cmd, env=run_env, capture_output=True, text=True, timeout=600)
    if p.returncode != 0:
        log.warn(f"TORCH_FR_BUFFER_SIZE={buffer_size}: exit code {p.returncode}: {p.stderr[-400:]}")
        return None
    times, dump = {}, None
    for line in p.stdout.splitlines():
        words = line.split()
        if "per_collective" in words:
            i = words.index("per_collective")
            times[int(words[i + 1])] = float(words[i + 2])
        elif "dump" in words:
            i = words.index("dump")
            dump = (float(words[i + 1]), int(words[i + 2]))
    return times, dump


def main():
    with open(os.path.join(WORK, "worker.py"), "w") as f:
        f.write(WORKER)
    mxrun = private_copy(MXRUN, os.path.join(WORK, "mxrun"))
    found = {b: {n: [] for n in list(SIZES.values()) + [ALONE]} for b in (0, 2000)}
    dumps = []
    for i in range(RUNS + 1):  # the first round warms up, not counted
        wait_quiet(QUIET_WAIT, log.progress)
        # Each round in the other order: neither setting always runs second (warmer caches).
        for buffer_size in ((0, 2000) if i % 2 == 0 else (2000, 0)):
            result = one_run(mxrun, buffer_size)
            if result is None or i == 0:
                continue
            times, dump = result
            for numel, us in times.items():
                found[buffer_size][numel].append(us)
            if dump:
                dumps.append(dump)
        log.progress(f"round {i} of {RUNS} done")
    e = detect_env("", PYTHON)
    print("## The flight recorder's cost per collective (Gloo)\n")
    print(f"- command: `RUNS={RUNS} ITERS={ITERS} scripts/bench/flight_recorder.sh`")
    print(f"- date: {utc_now()}; machine: {machine(e.cpu_model)}; repo at {e.git_rev}")
    print(f"- mxrun: {version_line(mxrun)}; workers: {PYTHON}")
    print(f"- 2 workers on one node, Gloo; rank 0 times {ITERS} all_reduce calls per size after 50 "
          "unrecorded warm-up calls; off: TORCH_FR_BUFFER_SIZE=0, on: 2000 (mxrun's default)")
    print(f"- {RUNS} runs per setting after a warm-up round, interleaved (the order swapped each round)\n")
    print("| tensor | off: us per collective (median) | on: us per collective (median) | "
          "cost per collective (us) | on / off |")
    print("|---|---:|---:|---:|---:|")
    rows = [(f"{label}, 2 ranks", numel) for label, numel in SIZES.items()]
    rows.append(("1 KiB, a group of one rank (no peer to wait for: the call's own cost)", ALONE))
    for label, numel in rows:
        off, on = median(found[0][numel]), median(found[2000][numel])
        print(f"| {label} | {off:.1f} | {on:.1f} | {on - off:+.1f} | {on / off:.3f} |")
    if dumps:
        print(f"\nTaking rank 0's dump over MXRUN_FLIGHT_SOCKET with the buffer full (2000 entries): "
              f"median {median([d[0] for d in dumps]):.1f} ms, {median([d[1] for d in dumps]) / 1e6:.2f} MB "
              "of JSON.")
    print_problems(log.problems)
    return 0


if __name__ == "__main__":
    run_main(main, cleanup=lambda: shutil.rmtree(WORK, ignore_errors=True))
