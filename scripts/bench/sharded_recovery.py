#!/usr/bin/env python3
"""Issue 55's targets, side by side in one run: scripts/examples/fsdp2.py (its default model,
FSDP2, Gloo) on 4 CPU ranks as 2 nodes x 2 on loopback, RUNS times each, interleaved.

- Step time, undisturbed: mxrun with the redundant copy at every step (the default), every 4
  steps, without it (MXRUN_SHARD_COPY_EVERY=1000000000), torchrun 2.13, and torchrun 2.13 with a
  torch.distributed.checkpoint every 10 steps (how a torchrun job comes back); the median over
  steps 6 to STEPS of the gaps between rank 0's step lines, then the median over runs.
- A rank lost: rank 3 (node 1) SIGKILLs itself after the forward of step KILL_STEP. mxrun with
  --standby_workers=1 on each node (its standby takes the rank, its shards come from the copy on
  node 0) against torchrun 2.13 --max_restarts=1 resuming every worker from the last checkpoint.
  For each: the gap in rank 0's step lines from the last step before the kill to the next step
  logged, to the kill's step logged again (the work lost with it), the steps logged twice, and
  whether every rank ended bit for bit as the undisturbed mxrun run (SHA-256 of its shards and
  optimizer state); mxrun's own restart line too (kill to the first step reported).
- A node lost without a spare: mxrun --nnodes=1:2, node 1's agent and workers SIGKILLed after
  step KILL_STEP is logged; the survivors re-shard in memory and go on at world size 2: from
  which step, the gap in rank 0's step lines, the steps redone.

Environment: RUNS (default 3), STEPS (default 40), KILL_STEP (default 25), MXRUN, MASTER,
TORCHRUN, PYTHON, QUIET_WAIT. Markdown on stdout, progress on stderr.
"""
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_common import (DEFAULT_MXRUN, DEFAULT_PYTHON, DEFAULT_TORCHRUN, REPO, Log, detect_env,
                          env, free_port, machine, median, print_problems, run_main, utc_now,
                          version_line, wait_quiet, wait_until)

RUNS = int(env("RUNS", "3"))
STEPS = int(env("STEPS", "40"))
KILL_STEP = int(env("KILL_STEP", "25"))
QUIET_WAIT = float(env("QUIET_WAIT", "60"))
MXRUN = env("MXRUN", DEFAULT_MXRUN)
MASTER = env("MASTER", os.path.join(os.path.dirname(MXRUN), "mxrun-master"))
TORCHRUN = env("TORCHRUN", DEFAULT_TORCHRUN)
PYTHON = env("PYTHON", DEFAULT_PYTHON)
SCRIPT = os.path.join(REPO, "scripts/examples/fsdp2.py")
TIMEOUT = 600
log = Log("sharded_recovery")


def worker_env(extra=None):
    e = dict(os.environ, PYTHON_EXEC=PYTHON, PYTHONPATH=os.path.join(REPO, "python"),
             OMP_NUM_THREADS="1", TORCH_DISABLE_SHARE_RDZV_TCP_STORE="1")
    e.update(extra or {})
    return e


class Job:
    """Two launchers (nodes) of one job; their output in files (no pipe fills up)."""

    def __init__(self, argvs, extra_env=None):
        self.dir = tempfile.mkdtemp(prefix="mxrun-bench-shard.")
        self.procs, self.files = [], []
        for i, argv in enumerate(argvs):
            out = open(os.path.join(self.dir, f"node{i}.out"), "w+")
            err = open(os.path.join(self.dir, f"node{i}.err"), "w+")
            self.files.append((out, err))
            self.procs.append(subprocess.Popen(argv, stdout=out, stderr=err,
                                               env=worker_env(extra_env),
                                               start_new_session=True))

    def text(self, i, which):
        with open(self.files[i][which].name) as f:
            return f.read()

    def wait(self):
        deadline = time.monotonic() + TIMEOUT
        for p in self.procs:
            try:
                p.wait(timeout=max(1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                log.warn(f"a launcher ran past {TIMEOUT} s: killed")
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
        codes = [p.returncode for p in self.procs]
        outs = [self.text(i, 0) for i in range(len(self.procs))]
        errs = [self.text(i, 1) for i in range(len(self.procs))]
        for out, err in self.files:
            out.close()
            err.close()
        shutil.rmtree(self.dir, ignore_errors=True)
        return codes, "".join(outs), errs


def mxrun_job(script_args, flags=(), extra_env=None, nnodes="2"):
    master = subprocess.Popen([MASTER, "--port=0"], stdout=subprocess.PIPE, text=True,
                              start_new_session=True)
    line = master.stdout.readline()
    m = re.search(r"listening on (\S+)", line)
    if not m:
        master.kill()
        raise RuntimeError(f"mxrun-master did not say where it listens: {line!r}")
    argvs = [[MXRUN, "--rdzv_backend=c10d", f"--rdzv_endpoint={m[1]}", "--rdzv_id=bench",
              f"--nnodes={nnodes}", f"--node_rank={n}", "--nproc_per_node=2", *flags, SCRIPT,
              *script_args] for n in range(2)]
    return Job(argvs, extra_env), master


def torchrun_job(script_args, flags=()):
    port = free_port()
    argvs = [[TORCHRUN, "--nnodes=2", f"--node_rank={n}", "--nproc_per_node=2",
              "--rdzv_backend=c10d", f"--rdzv_endpoint=127.0.0.1:{port}", "--rdzv_id=bench",
              *flags, SCRIPT, *script_args] for n in range(2)]
    return Job(argvs)


def finish(job, master=None, killed_node=None):
    result = job.wait()
    if master is not None:
        master.terminate()
        master.wait()
    codes = [c for i, c in enumerate(result[0]) if i != killed_node]
    if any(codes):
        log.warn(f"exit codes {codes}: {result[2][0][-300:]} / {result[2][1][-300:]}")
    return result


def step_lines(out):
    """[(step, time)] of rank 0's step lines, in order."""
    return [(int(m[1]), float(m[2])) for m in
            re.finditer(r'\{"event": "step", "step": ([0-9]+), "time": ([0-9.]+)', out)]


def median_step(out):
    t = dict(step_lines(out))
    gaps = [t[s] - t[s - 1] for s in range(7, STEPS + 1) if s in t and s - 1 in t]
    return median(gaps) if gaps else float("nan")


def digests(out):
    return {int(m[1]): m[2] for m in re.finditer(
        r'\{"event": "done", "rank": ([0-9]+), "state_sha256": "([0-9a-f]{64})"', out)}


def after_kill(out, kill_step):
    """(gap to the next step logged, gap to kill_step logged again, steps logged twice) from the
    last step line before the kill (kill_step - 1)."""
    lines = step_lines(out)
    before = next((i for i, (s, _) in enumerate(lines) if s == kill_step - 1), None)
    if before is None or before + 1 >= len(lines):
        return float("nan"), float("nan"), None
    t0 = lines[before][1]
    back = next((t for s, t in lines[before + 1:] if s == kill_step), float("nan"))
    steps = [s for s, _ in lines]
    return lines[before + 1][1] - t0, back - t0, len(steps) - len(set(steps))


def main():
    args = ["--steps", str(STEPS)]
    kinds = {
        "mxrun, copy every step": lambda: mxrun_job(args, extra_env={"MXRUN_SHARD_COPY_EVERY": "1"}),
        "mxrun, copy every 4 steps": lambda: mxrun_job(args,
                                                       extra_env={"MXRUN_SHARD_COPY_EVERY": "4"}),
        "mxrun, no copy": lambda: mxrun_job(args,
                                            extra_env={"MXRUN_SHARD_COPY_EVERY": "1000000000"}),
        "torchrun 2.13": lambda: (torchrun_job(args), None),
        "torchrun 2.13, checkpoint every 10 steps": None,  # a folder of its own each run
    }
    steps = {k: [] for k in kinds}
    copy_lines, base = [], None
    for i in range(RUNS):
        for kind, start in kinds.items():
            wait_quiet(QUIET_WAIT, log.progress)
            log.progress(f"run {i + 1}/{RUNS}: {kind}")
            ckpt = None
            if start is None:
                ckpt = tempfile.mkdtemp(prefix="mxrun-bench-dcp.")
                job, master = torchrun_job(args + ["--ckpt_dir", ckpt]), None
            else:
                job, master = start()
            codes, out, errs = finish(job, master)
            if ckpt:
                shutil.rmtree(ckpt, ignore_errors=True)
            steps[kind].append(median_step(out))
            if kind == "mxrun, copy every step":
                copy_lines += re.findall(r"shard copy: .*", errs[0] + errs[1])
                base = base or (digests(out) if not any(codes) else None)
    rank_lost = {"mxrun + standby": [], "torchrun 2.13 + checkpoint every 10": []}
    kill = ["--kill_rank", "3", "--kill_step", str(KILL_STEP), "--kill_after_forward"]
    for i in range(RUNS):
        for kind in rank_lost:
            wait_quiet(QUIET_WAIT, log.progress)
            log.progress(f"rank lost {i + 1}/{RUNS}: {kind}")
            ckpt = None
            if kind.startswith("mxrun"):
                job, master = mxrun_job(args + kill, ["--max_restarts=1", "--standby_workers=1"])
            else:
                ckpt = tempfile.mkdtemp(prefix="mxrun-bench-dcp.")
                job, master = torchrun_job(args + kill + ["--ckpt_dir", ckpt],
                                           ["--max_restarts=1"]), None
            codes, out, errs = finish(job, master)
            if ckpt:
                shutil.rmtree(ckpt, ignore_errors=True)
            gap, back, redone = after_kill(out, KILL_STEP)
            both = (errs[0] + errs[1]).replace("\n", " ")
            m = re.search(r"in-process restart 1 .*?first step ([0-9.]+) s", both)
            rank_lost[kind].append({
                "ok": not any(codes), "gap": gap, "back": back, "redone": redone,
                "standby": "standby pid" in both, "reported": float(m[1]) if m else None,
                "bitwise": bool(base) and digests(out) == base})
    node_lost = []
    for i in range(RUNS):
        wait_quiet(QUIET_WAIT, log.progress)
        log.progress(f"node lost {i + 1}/{RUNS}")
        job, master = mxrun_job(args, ["--max_restarts=1", "--standby_workers=0",
                                       "--rdzv_conf=last_call_timeout=10"], nnodes="1:2")
        seen = wait_until(lambda: f'"step": {KILL_STEP},' in job.text(0, 0), TIMEOUT, poll=0.05)
        pids = [int(p) for p in re.findall(r'\{"event": "round", "rank": [23], "pid": ([0-9]+)',
                                           job.text(1, 0))]
        if seen:
            os.killpg(job.procs[1].pid, signal.SIGKILL)  # node 1's agent
            for pid in pids:  # and its workers (their own sessions)
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        codes, out, errs = finish(job, master, killed_node=1)
        lines = step_lines(out)
        killed_at = next((t for s, t in lines if s == KILL_STEP), None)
        m = re.search(r'"from_step": ([0-9]+), "restored_from": "memory", "world_size": 2', out)
        later = [t for s, t in lines if killed_at is not None and t > killed_at]
        node_lost.append({"ok": codes[0] == 0 and bool(seen), "from": int(m[1]) if m else None,
                          "gap": (later[0] - killed_at) if later else float("nan"),
                          "redone": len(lines) - len({s for s, _ in lines}),
                          "last": max((s for s, _ in lines), default=0)})

    copy_ms = [float(x) for x in re.findall(r"median ([0-9.]+) ms", " ".join(copy_lines))]
    each_mb = [float(x) for x in re.findall(r"([0-9.]+) MB each", " ".join(copy_lines))]
    held_mb = [float(x) for x in re.findall(r"([0-9.]+) MB held", " ".join(copy_lines))]
    med = {k: median(v) for k, v in steps.items()}
    off = med["mxrun, no copy"]
    print(f"# FSDP2 on 2 nodes x 2: the redundant copy and recovery ({utc_now()})\n")
    e = detect_env(TORCHRUN, PYTHON)
    print(f"{machine(e.cpu_model)}; workers' PyTorch: {e.torch_py}; commit {e.git_rev}; "
          f"{version_line(MXRUN)}\n")
    print(f"`RUNS={RUNS} STEPS={STEPS} KILL_STEP={KILL_STEP} scripts/bench/sharded_recovery.sh` "
          "(scripts/examples/fsdp2.py, default model, 4 CPU ranks as 2 nodes x 2 on loopback, "
          "Gloo)\n")
    print("| undisturbed | median step (s) | against mxrun without the copy | against torchrun |")
    print("|---|---|---|---|")
    for kind, m in med.items():
        print(f"| {kind} | {m:.4f} | {m / off:.3f}x | {m / med['torchrun 2.13']:.3f}x |")
    print(f"\nThe copy: {median(each_mb) if each_mb else 0:.2f} MB per rank per exchange, median "
          f"{median(copy_ms) if copy_ms else 0:.1f} ms off the loop's path, "
          f"{median(held_mb) if held_mb else 0:.2f} MB held in host memory per rank (its last 2 "
          f"images and its neighbour's); overhead {(med['mxrun, copy every step'] / off - 1) * 100:+.1f}% "
          "of the step time every step, "
          f"{(med['mxrun, copy every 4 steps'] / off - 1) * 100:+.1f}% every 4.\n")
    print(f"| rank 3 lost after the forward of step {KILL_STEP} | run | next step logged (s) | "
          f"step {KILL_STEP} logged again (s) | steps redone | mxrun's first step (s) | by a "
          "standby | bitwise as undisturbed |")
    print("|---|---|---|---|---|---|---|---|")
    for kind, runs in rank_lost.items():
        for i, r in enumerate(runs, 1):
            print(f"| {kind} | {i} | {r['gap']:.3f} | {r['back']:.3f} | {r['redone']} | "
                  f"{r['reported'] if r['reported'] is not None else '-'} | "
                  f"{r['standby'] if kind.startswith('mxrun') else '-'} | {r['bitwise']} |")
    for kind, runs in rank_lost.items():
        print(f"\n{kind}: median next step {median([r['gap'] for r in runs]):.3f} s, step "
              f"{KILL_STEP} again {median([r['back'] for r in runs]):.3f} s after the last before "
              f"the kill (a step takes {med['mxrun, copy every step']:.3f} s).", end="")
    print("\n\n| node 1 lost after step {0} (--nnodes=1:2) | run | went on at world size 2 from "
          "step | next step logged (s) | steps redone | last step |".format(KILL_STEP))
    print("|---|---|---|---|---|---|")
    for i, r in enumerate(node_lost, 1):
        print(f"| mxrun, re-sharded in memory | {i} | {r['from']} | {r['gap']:.3f} | "
              f"{r['redone']} | {r['last']} |")
    print_problems(log.problems)


if __name__ == "__main__":
    run_main(main)
