#!/usr/bin/env python3
"""Issue 55's HSDP row, side by side in one run: scripts/examples/fsdp2.py --replicate=2 (2
replica groups x 2 shards, 4 CPU ranks as 2 nodes x 2 on loopback, Gloo) under mxrun, against
torchft 0.2.0 on the same shape (scripts/bench/reference/fsdp2_torchft.py: one torchrun 2.13
per replica group, FSDP2 within it, torchft's Manager and lighthouse across the groups), RUNS
times each, interleaved.

- Undisturbed: the median step time (rank 0's step lines, steps 6 to STEPS).
- A rank lost: rank 3 (group 1, shard 1) SIGKILLs itself after the forward of step KILL_STEP.
  mxrun with --standby_workers=1 per node: the standby takes the rank and its shards come from
  its replica peer (rank 1), no copy kept. torchft: group 1's torchrun (--max_restarts=1)
  restarts both of its workers, group 0 trains on alone, and group 1 heals from group 0's
  memory when it is back. For each: the gap in rank 0's step lines from step KILL_STEP - 1 to
  the next step, the steps trained at half strength (torchft: half the samples of an
  undisturbed step; mxrun never trains one), the time until both groups train again, steps
  logged twice or discarded (torchft: a step whose all-reduce failed is not committed and is
  trained again), and (mxrun) whether every rank ended bit for bit as the undisturbed run.
  torchft's run with the kill goes FT_TAIL (default 60) steps longer, so that the restarted
  group is back before the end; its state is the groups' own (they agree), not an undisturbed
  run's: the steps at half strength averaged half the samples.

Environment: RUNS (default 3), STEPS (default 40), KILL_STEP (default 25), FT_TAIL,
FT_HEARTBEAT_MS (the lighthouse's --heartbeat_timeout_ms, default torchft's 5000),
TORCHFT_SITE (a folder holding torchft 0.2.0; installed there with pip --target --no-deps,
pinned, if it has none; default .deps/torchft-0.2.0), MXRUN, MASTER, TORCHRUN, PYTHON,
QUIET_WAIT. Markdown on stdout, progress on stderr.
"""
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_common import (REPO, Log, detect_env, env, free_port, machine, median,  # noqa: E402
                          print_problems, run_main, utc_now, version_line, wait_quiet)
import sharded_recovery as sr  # noqa: E402  (its Job, mxrun_job and step-line parsers)

RUNS = int(env("RUNS", "3"))
STEPS = int(env("STEPS", "40"))
KILL_STEP = int(env("KILL_STEP", "25"))
QUIET_WAIT = float(env("QUIET_WAIT", "60"))
# torchft's run with the kill goes on this many steps longer: its survivors train on alone (at
# about twice the speed) while torchrun restarts the lost group, which must be back in time.
FT_TAIL = int(env("FT_TAIL", "60"))
# The lighthouse drops a replica group from the quorum when its heartbeats stop for this long
# (torchft's default, as torchtitan runs it): the survivors' wait after a loss.
FT_HEARTBEAT_MS = int(env("FT_HEARTBEAT_MS", "5000"))
TORCHFT_SITE = env("TORCHFT_SITE", os.path.join(REPO, ".deps", "torchft-0.2.0"))
FT_SCRIPT = os.path.join(REPO, "scripts/bench/reference/fsdp2_torchft.py")
# torchft 0.2.0 and what it imports beyond the venv's PyTorch, pinned (--no-deps: the venv's
# torch stays the one both launchers run).
TORCHFT_PINS = ["torchft==0.2.0", "opentelemetry-api==1.39.0", "opentelemetry-sdk==1.39.0",
                "opentelemetry-exporter-otlp-proto-http==1.39.0",
                "opentelemetry-exporter-otlp-proto-common==1.39.0",
                "opentelemetry-proto==1.39.0", "opentelemetry-semantic-conventions==0.60b0",
                "googleapis-common-protos==1.76.0", "protobuf==6.33.6", "requests==2.34.2",
                "urllib3==2.8.0", "idna==3.20", "charset-normalizer==3.5.3",
                "certifi==2026.10.19.post1", "importlib-metadata==8.7.1", "zipp==4.1.2",
                "typing-extensions==4.16.0"]
log = Log("hsdp_recovery")


def ensure_torchft():
    if os.path.isdir(os.path.join(TORCHFT_SITE, "torchft-0.2.0.dist-info")):
        return
    log.progress(f"installing torchft 0.2.0 into {TORCHFT_SITE}")
    subprocess.run([sr.PYTHON, "-m", "pip", "install", "--quiet", "--no-deps", "--target",
                    TORCHFT_SITE, *TORCHFT_PINS], check=True)


def ft_env():
    return {"PYTHONPATH": TORCHFT_SITE + os.pathsep + os.path.join(REPO, "python")}


def torchft_job(script_args):
    """The lighthouse and one torchrun per replica group; returns (job, lighthouse)."""
    port = free_port()
    lighthouse = subprocess.Popen(
        [sr.PYTHON, os.path.join(TORCHFT_SITE, "bin", "torchft_lighthouse"), "--min_replicas",
         "1", "--bind", f"127.0.0.1:{port}", "--join_timeout_ms", "1000",
         "--heartbeat_timeout_ms", str(FT_HEARTBEAT_MS)],
        env=sr.worker_env(ft_env()), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True)
    argvs = [[sr.TORCHRUN, "--nnodes=1", "--nproc_per_node=2", "--max_restarts=1",
              "--rdzv_backend=c10d", f"--rdzv_endpoint=127.0.0.1:{free_port()}",
              f"--rdzv_id=ft{g}", FT_SCRIPT, f"--replica_id={g}", *script_args]
             for g in range(2)]
    extra = dict(ft_env(), TORCHFT_LIGHTHOUSE=f"http://127.0.0.1:{port}")
    return sr.Job(argvs, extra), lighthouse


def ft_finish(job, lighthouse):
    result = job.wait()
    lighthouse.terminate()
    lighthouse.wait()
    if any(result[0]):
        sr.log.warn(f"torchft exit codes {result[0]}: {result[2][0][-300:]} / "
                    f"{result[2][1][-300:]}")
    return result


def ft_lines(out, replica):
    """[(step, time, participants)] of a replica group's rank 0 step lines, in order."""
    return [(int(m[1]), float(m[2]), int(m[3])) for m in re.finditer(
        r'\{"event": "step", "replica": ' + str(replica) +
        r', "step": ([0-9]+), "time": ([0-9.]+), "participants": ([0-9]+)', out)]


def ft_after_kill(out):
    lines = ft_lines(out, 0)
    before = next((i for i, (s, _, _) in enumerate(lines) if s == KILL_STEP - 1), None)
    if before is None or before + 1 >= len(lines):
        return {"gap": float("nan"), "half": None, "full": float("nan"), "redone": None}
    t0 = lines[before][1]
    later = lines[before + 1:]
    full = next((t for _, t, n in later if n == 2), float("nan"))
    steps = [s for s, _, _ in lines]
    discarded = len(re.findall(r'\{"event": "discarded", "replica": 0,', out))
    return {"gap": later[0][1] - t0, "half": sum(1 for _, _, n in later if n == 1),
            "full": full - t0, "redone": discarded + len(steps) - len(set(steps))}


def main():
    ensure_torchft()
    args = ["--steps", str(STEPS)]
    hsdp = args + ["--replicate", "2"]
    kill = ["--kill_rank", "3", "--kill_step", str(KILL_STEP)]
    steps = {"mxrun, HSDP": [], "torchft 0.2.0, HSDP": []}
    base = None
    for i in range(RUNS):
        wait_quiet(QUIET_WAIT, log.progress)
        log.progress(f"undisturbed {i + 1}/{RUNS}: mxrun")
        codes, out, _ = sr.finish(*sr.mxrun_job(hsdp))
        steps["mxrun, HSDP"].append(sr.median_step(out))
        base = base or (sr.digests(out) if not any(codes) else None)
        wait_quiet(QUIET_WAIT, log.progress)
        log.progress(f"undisturbed {i + 1}/{RUNS}: torchft")
        codes, out, _ = ft_finish(*torchft_job(args))
        t = {s: at for s, at, _ in ft_lines(out, 0)}
        gaps = [t[s] - t[s - 1] for s in range(7, STEPS + 1) if s in t and s - 1 in t]
        steps["torchft 0.2.0, HSDP"].append(median(gaps) if gaps else float("nan"))
    lost = {"mxrun + standby": [], "torchft 0.2.0": []}
    for i in range(RUNS):
        wait_quiet(QUIET_WAIT, log.progress)
        log.progress(f"rank lost {i + 1}/{RUNS}: mxrun")
        codes, out, _ = sr.finish(*sr.mxrun_job(hsdp + kill + ["--kill_after_forward"],
                                                   ["--max_restarts=1", "--standby_workers=1"]))
        gap, _, redone = sr.after_kill(out, KILL_STEP)
        lost["mxrun + standby"].append({
            "ok": not any(codes), "gap": gap, "half": 0, "full": gap, "redone": redone,
            "bitwise": bool(base) and sr.digests(out) == base})
        wait_quiet(QUIET_WAIT, log.progress)
        log.progress(f"rank lost {i + 1}/{RUNS}: torchft")
        codes, out, _ = ft_finish(*torchft_job(["--steps", str(STEPS + FT_TAIL)] + kill))
        r = ft_after_kill(out)
        d = sr.digests(out)
        r.update(ok=not any(codes), bitwise=None,
                 agree=len(d) == 4 and d.get(0) == d.get(2) and d.get(1) == d.get(3))
        lost["torchft 0.2.0"].append(r)

    print(f"# HSDP (2 replica groups x 2 shards): a rank lost, mxrun and torchft ({utc_now()})\n")
    e = detect_env(sr.TORCHRUN, sr.PYTHON)
    print(f"{machine(e.cpu_model)}; workers' PyTorch: {e.torch_py}; torchft 0.2.0 from "
          f"{TORCHFT_SITE}; commit {e.git_rev}; {version_line(sr.MXRUN)}\n")
    print(f"`RUNS={RUNS} STEPS={STEPS} KILL_STEP={KILL_STEP} FT_TAIL={FT_TAIL} "
          f"FT_HEARTBEAT_MS={FT_HEARTBEAT_MS} scripts/bench/hsdp_recovery.sh` "
          "(scripts/examples/fsdp2.py --replicate=2 and scripts/bench/reference/"
          "fsdp2_torchft.py: the same model and data, 4 CPU ranks on loopback, Gloo)\n")
    med = {k: median(v) for k, v in steps.items()}
    print("| undisturbed | median step (s) | against mxrun |")
    print("|---|---|---|")
    for kind, m in med.items():
        print(f"| {kind} | {m:.4f} | {m / med['mxrun, HSDP']:.3f}x |")
    print(f"\n| rank 3 lost after the forward of step {KILL_STEP} | run | next step logged (s) | "
          "steps at half strength | both groups train again (s) | steps trained again | "
          "bitwise as undisturbed | exit 0 |")
    print("|---|---|---|---|---|---|---|---|")
    for kind, runs in lost.items():
        for i, r in enumerate(runs, 1):
            bitwise = r["bitwise"] if r["bitwise"] is not None else \
                f"- (groups agree: {r['agree']})"
            print(f"| {kind} | {i} | {r['gap']:.3f} | {r['half']} | {r['full']:.3f} | "
                  f"{r['redone']} | {bitwise} | {r['ok']} |")
    for kind, runs in lost.items():
        print(f"\n{kind}: median next step {median([r['gap'] for r in runs]):.3f} s, both "
              f"groups training {median([r['full'] for r in runs]):.3f} s after step "
              f"{KILL_STEP - 1}, steps at half strength "
              f"{median([r['half'] for r in runs if r['half'] is not None] or [float('nan')])}.",
              end="")
    print()
    print_problems(log.problems + sr.log.problems)


if __name__ == "__main__":
    run_main(main)
