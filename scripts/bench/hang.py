#!/usr/bin/env python3
"""Hang detection benchmark: from the moment a rank hangs to the group restarted, mxrun against
torchrun, side by side on the same workers.

Cases (2 or 3 workers on this machine, --max_restarts=1; the hang happens on attempt 0 only):
  filetimer  PyTorch's own watchdog: scripts/examples/file_timer.py, rank 1 hangs inside
             `timer.expires(after=T)`; TORCHELASTIC_ENABLE_FILE_TIMER=1. mxrun and torchrun.
             Hang moment: the worker enters the timer. torchrun 2.13's FileTimerServer, after
             killing the worker, kills the agent itself with the same signal (SIGKILL), which ends
             the job instead of restarting it (file_based_local_timer.py); the table says so, and
             once seen, torchrun's remaining runs of the case are skipped.
  heartbeat  a shell worker touches $MXRUN_HEARTBEAT_FILE once, then hangs; --hang_timeout=T.
             mxrun only: torchrun has no such rule (it would wait forever).
             Hang moment: the worker's last beat.
  barrier    3 shell workers, ranks 0 and 1 exit 0, rank 2 hangs; --exit_barrier_timeout=T.
             mxrun; torchrun has no exit barrier for workers and is run once, bounded by
             TORCHRUN_BOUND seconds, to show that it never restarts.
             Hang moment: the first peer's exit.
"Restarted" is the moment the last worker of attempt 1 has started (workers write their start
time first thing, before importing anything heavy). Also reported: the time mxrun spent
collecting diagnostics (its "hang diagnostics ... in S s" line).

Prints a Markdown table of medians on stdout; progress on stderr.

Environment:
  RUNS           measured runs per case and launcher (default 5)
  TIMEOUT        T, the timer / heartbeat / barrier timeout in seconds (default 2)
  TORCHRUN_BOUND seconds torchrun is left waiting in the barrier case (default 60)
  MXRUN          mxrun binary (default <repo>/build/bin/mxrun)
  TORCHRUN       torchrun (default <repo>/.venv/bin/torchrun: torchrun 2.13 from the project's venv)
hang.sh runs it with $PYTHON (default <repo>/.venv/bin/python3), a Python with PyTorch: it drives
the measurements and runs file_timer.py's workers under both launchers (PYTHON_EXEC).

torchrun 2.13 gets the same flags as mxrun: its default --monitor_interval is already 0.1 s.
mxrun runs as a private copy (a rebuild cannot swap it). Every launcher starts in a process group
of its own; whatever a run leaves behind is found by a marker in its environment and killed by
pid.
"""
import os
import re
import shutil
import signal
import subprocess
import sys
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_common import (DEFAULT_MXRUN, DEFAULT_PYTHON, DEFAULT_TORCHRUN, REPO, Log,  # noqa: E402
                          detect_env, die, env, executable, is_whole, kill_marked, kill_tree,
                          machine, make_workdir, median, print_problems, private_copy, run_main,
                          torch_version, utc_now)

SCRIPT = "hang.sh"


def fail(msg):
    die(SCRIPT, msg)


# ---------------------------------------------------------------- settings
RUNS_S = env("RUNS", "5")
TIMEOUT_S = env("TIMEOUT", "2")
BOUND_S = env("TORCHRUN_BOUND", "60")
MXRUN_GIVEN = env("MXRUN", DEFAULT_MXRUN)
TORCHRUN = env("TORCHRUN", DEFAULT_TORCHRUN)
PYTHON = sys.executable

if not is_whole(RUNS_S) or int(RUNS_S) == 0:
    fail("RUNS must be a positive integer")
if not is_whole(BOUND_S) or int(BOUND_S) == 0:
    fail("TORCHRUN_BOUND must be a positive integer")
try:
    T = float(TIMEOUT_S)
except ValueError:
    T = float("nan")
if not 0 < T <= 600:
    fail("TIMEOUT must be a number of seconds in (0, 600]")
if not executable(MXRUN_GIVEN):
    fail(f"mxrun not found or not executable: {MXRUN_GIVEN} (run scripts/build.sh)")
if not executable(TORCHRUN):
    fail(f"torchrun not found: {TORCHRUN}")
if subprocess.run([PYTHON, "-c", "import torch"], stdin=subprocess.DEVNULL,
                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode != 0:
    fail(f"{PYTHON} cannot import torch")

RUNS = int(RUNS_S)
BOUND = float(BOUND_S)
WORK = make_workdir("mxrun-bench.")
MXRUN = os.path.join(WORK, "bin", "mxrun")   # the private copy (prepare)
EXAMPLE = os.path.join(REPO, "scripts/examples/file_timer.py")
RUN_LIMIT = 120.0

log = Log(SCRIPT)


def prepare():
    os.mkdir(os.path.join(WORK, "bin"))
    private_copy(MXRUN_GIVEN, MXRUN)


def print_header():
    invocation = f"RUNS={RUNS_S} TIMEOUT={TIMEOUT_S}"
    if BOUND_S != "60":
        invocation += f" TORCHRUN_BOUND={BOUND_S}"
    if MXRUN_GIVEN != DEFAULT_MXRUN:
        invocation += f" MXRUN={MXRUN_GIVEN}"
    if TORCHRUN != DEFAULT_TORCHRUN:
        invocation += f" TORCHRUN={TORCHRUN}"
    if PYTHON != DEFAULT_PYTHON:
        invocation += f" PYTHON={PYTHON}"
    invocation += " scripts/bench/hang.sh"
    e = detect_env(TORCHRUN, PYTHON)
    have = lambda tool: "yes" if shutil.which(tool) else "no"
    print("## mxrun vs torchrun: from a hang to the group restarted")
    print()
    print(f"- command: `{invocation}`")
    print(f"- date: {utc_now()}")
    print(f"- machine: {machine(e.cpu_model)}")
    print(f"- mxrun: `{MXRUN_GIVEN}` (repo at {e.git_rev}); stack dumpers: eu-stack "
          f"{have('eu-stack')}, gdb {have('gdb')}, py-spy {have('py-spy')}")
    print(f"- torchrun: `{TORCHRUN}` (torch {torch_version(e.torch_py)})")
    print(f"- runs: {RUNS} per case and launcher, the launchers interleaved; figures are medians; "
          f"T = {TIMEOUT_S} s")
    print(flush=True)


# A shell worker writing the same events as file_timer.py: "<event> <rank> <attempt> <time>".
SHELL_EVENT = 'ev() { echo "$1 $RANK $TORCHELASTIC_RESTART_COUNT $(date +%s.%N)" >> "$EVENTS"; }'
HEARTBEAT_WORKER = SHELL_EVENT + '''
ev start
if [ "$RANK" = 1 ] && [ "$TORCHELASTIC_RESTART_COUNT" = 0 ]; then
  touch "$MXRUN_HEARTBEAT_FILE"; ev hang; exec sleep 3600
fi
sleep 0.3; ev done'''
BARRIER_WORKER = SHELL_EVENT + '''
ev start
if [ "$RANK" = 2 ] && [ "$TORCHELASTIC_RESTART_COUNT" = 0 ]; then exec sleep 3600; fi
ev done'''


run_count = 0
running = []   # the launcher of the run under way and its marker


def run(cmd, env_extra, events, limit):
    """Runs a launcher in its own process group; kills it and its workers past `limit`. Returns
    (exit code or None when killed, stderr, events as tuples). Whatever the run left behind (a
    worker of a launcher that died first: torchrun 2.x gives every worker a session of its own)
    is found by the marker in its environment and killed when the run ends."""
    global run_count
    run_count += 1
    marker = f"{WORK}/run{run_count}"
    env = dict(os.environ, EVENTS=events, PYTHON_EXEC=PYTHON, TMPDIR=WORK, BENCH_HANG_RUN=marker,
               **env_extra)
    with open(os.path.join(WORK, "stderr"), "w+") as err:
        p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err,
                             cwd=WORK, env=env, start_new_session=True)
        running[:] = [p, marker]   # for cleanup, should the benchmark be stopped meanwhile
        try:
            rc = p.wait(timeout=limit)
        except subprocess.TimeoutExpired:
            kill_tree(p.pid)
            p.wait()
            rc = None
        kill_marked("BENCH_HANG_RUN=" + marker)
        running.clear()
        err.seek(0)
        text = err.read()
    rows = []
    if os.path.exists(events):
        with open(events) as f:
            for line in f:
                parts = line.split()
                if len(parts) == 4:
                    rows.append((parts[0], int(parts[1]), int(parts[2]), float(parts[3])))
        os.unlink(events)
    return rc, text, rows


def recovery(rows, hang_event, workers):
    """Seconds from the hang moment to the last start of attempt 1; None when it never came."""
    hang = [t for (e, r, a, t) in rows if e == hang_event and a == 0]
    starts = [t for (e, r, a, t) in rows if e == "start" and a == 1]
    if not hang or len(starts) < workers:
        return None
    return max(starts) - min(hang)


def diagnostics_seconds(stderr):
    m = re.search(r"hang diagnostics of rank [0-9, ]+ written to \S+ in ([0-9.]+) s", stderr)
    return float(m.group(1)) if m else None


CASES = {
    "filetimer": dict(
        workers=2, hang_event="hang", env={"TORCHELASTIC_ENABLE_FILE_TIMER": "1"},
        mxrun=[MXRUN, "--nproc_per_node=2", "--max_restarts=1", EXAMPLE, "--hang_rank", "1",
               "--expire_after", str(T), "--events", "{events}"],
        torchrun=[TORCHRUN, "--nproc_per_node=2", "--max_restarts=1", EXAMPLE,
                  "--hang_rank", "1", "--expire_after", str(T), "--events", "{events}"]),
    "heartbeat": dict(
        workers=2, hang_event="hang", env={},
        mxrun=[MXRUN, "--nproc_per_node=2", "--max_restarts=1", f"--hang_timeout={T}",
               "--no_python", "/bin/sh", "-c", HEARTBEAT_WORKER],
        torchrun=None),
    "barrier": dict(
        workers=3, hang_event="done", env={},
        mxrun=[MXRUN, "--nproc_per_node=3", "--max_restarts=1", f"--exit_barrier_timeout={T}",
               "--no_python", "/bin/sh", "-c", BARRIER_WORKER],
        torchrun=[TORCHRUN, "--nproc_per_node=3", "--max_restarts=1",
                  "--no_python", "/bin/sh", "-c", BARRIER_WORKER]),
}


def main():
    prepare()
    print_header()
    results = {}   # (case, launcher) -> {"recovery": [...], "diag": [...], "note": str}
    for case, spec in CASES.items():
        for launcher in ("mxrun", "torchrun"):
            results[(case, launcher)] = {"recovery": [], "diag": [], "note": ""}
        for i in range(RUNS):
            for launcher in ("mxrun", "torchrun"):
                cmd = spec[launcher]
                if cmd is None:
                    continue
                if case == "barrier" and launcher == "torchrun" and i > 0:
                    continue   # once is enough to show it never restarts
                if results[(case, launcher)].get("final"):
                    continue   # the same end again would tell nothing new
                events = os.path.join(WORK, "events")
                cmd = [c.replace("{events}", events) for c in cmd]
                limit = BOUND if (case == "barrier" and launcher == "torchrun") else RUN_LIMIT
                log.progress(f"{case} {launcher} run {i + 1}")
                t0 = time.time()
                rc, stderr, rows = run(cmd, spec["env"], events, limit)
                r = recovery(rows, spec["hang_event"], spec["workers"])
                entry = results[(case, launcher)]
                if r is None:
                    hung = any(e == spec["hang_event"] and a == 0 for (e, _, a, _) in rows)
                    if (case == "filetimer" and launcher == "torchrun" and hung
                            and rc == -signal.SIGKILL):
                        # torch 2.x: the FileTimerServer reaps the worker, then SIGKILLs its own agent.
                        entry["note"] = ("no restart: the expired timer's SIGKILL went to the worker and "
                                         "then to torchrun itself (its FileTimerServer), ending the job")
                        entry["final"] = True
                    elif rc is None:
                        entry["note"] = (f"never restarted: still waiting after {time.time() - t0:.0f} s"
                                         f" (killed at the bound)")
                    else:
                        log.warn(f"{case} {launcher}: no restart seen (exit code {rc})\n"
                                 + stderr[-1500:])
                    continue
                if rc != 0:
                    log.warn(f"{case} {launcher}: exit code {rc} after the restart")
                entry["recovery"].append(r)
                d = diagnostics_seconds(stderr)
                if d is not None:
                    entry["diag"].append(d)

    print("| case | launcher | hang → group restarted | min–max | over the timeout T | diagnostics collected in |")
    print("|---|---|---|---|---|---|")
    for case in CASES:
        for launcher in ("mxrun", "torchrun"):
            entry = results[(case, launcher)]
            if CASES[case][launcher] is None:
                print(f"| {case} | {launcher} | no such rule | | | |")
                continue
            if not entry["recovery"]:
                print(f"| {case} | {launcher} | {entry['note'] or 'no restart seen'} | | | |")
                continue
            rec = median(entry["recovery"])
            diag = f"{median(entry['diag']):.2f} s" if entry["diag"] else "-"
            spread = f"{min(entry['recovery']):.2f}–{max(entry['recovery']):.2f} s"
            print(f"| {case} | {launcher} | {rec:.2f} s (n={len(entry['recovery'])}) | {spread} | "
                  f"{rec - T:+.2f} s | {diag} |")
    print_problems(log.problems)


def cleanup():
    # A run cut short: its launcher's tree, and whatever carries its marker.
    if running:
        p, marker = running
        kill_tree(p.pid)
        p.wait()
        kill_marked("BENCH_HANG_RUN=" + marker)
    shutil.rmtree(WORK, ignore_errors=True)


if __name__ == "__main__":
    run_main(main, cleanup)
