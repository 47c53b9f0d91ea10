"""Workers' share of a loaded machine: mxrun against torchrun (and an older mxrun build), side by
side. torchrun starts each worker in a session of its own; with sched_autogroup_enabled=1 the
kernel gives every session one scheduling share, so workers kept in the launcher's session
share one share between them while other tenants' sessions each keep theirs.

The machine is loaded with LOAD busy loops, each in a session of its own (other tenants); then
each launcher runs NPROC workers that each burn WORK_S seconds of CPU time in a pure Python loop
(no torch: the figure is the scheduler's, not a library's). Per run: the slowest worker's wall
time for its fixed work, and whether every worker led its own session. Medians over RUNS runs,
the launchers interleaved.

Environment: RUNS (5), LOAD (the number of CPUs), NPROC (2), WORK_S (3), MXRUN (build/bin/mxrun),
TORCHRUN (.venv/bin/torchrun), BASELINE_MXRUN (an older mxrun build; optional), WORKER_PYTHON
(the interpreter of torchrun's #! line). Markdown on stdout, progress on stderr.
"""
import json, os, shutil, subprocess, sys, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_common import (DEFAULT_MXRUN, DEFAULT_TORCHRUN, Log, detect_env, die, env, executable,
                          is_whole, kill_tree, machine, make_workdir, median, nproc,
                          private_copy, python_version, run_main, sha256_12, torch_python,
                          torch_version, utc_now, version_line, loadavg)

SCRIPT = "sessions.py"


def fail(msg):
    die(SCRIPT, msg)


RUNS_S, LOAD_S, NPROC_S = env("RUNS", "5"), env("LOAD", str(nproc())), env("NPROC", "2")
WORK_S_S = env("WORK_S", "3")
MXRUN_GIVEN, TORCHRUN = env("MXRUN", DEFAULT_MXRUN), env("TORCHRUN", DEFAULT_TORCHRUN)
BASELINE_GIVEN = env("BASELINE_MXRUN", "")
for name, text in (("RUNS", RUNS_S), ("LOAD", LOAD_S), ("NPROC", NPROC_S)):
    if not is_whole(text) or (name != "LOAD" and int(text) < 1):
        fail(f"{name} must be a whole number{'' if name == 'LOAD' else ' >= 1'}, not '{text}'")
try:
    WORK_S = float(WORK_S_S)
except ValueError:
    WORK_S = -1.0
if not 0 < WORK_S <= 600:
    fail(f"WORK_S must be a number of seconds in (0, 600], not '{WORK_S_S}'")
RUNS, LOAD, NPROC = int(RUNS_S), int(LOAD_S), int(NPROC_S)
for what, path in (("mxrun", MXRUN_GIVEN), ("torchrun", TORCHRUN),
                   ("baseline mxrun", BASELINE_GIVEN)):
    if path and not executable(path):
        fail(f"{what} not found or not executable: {path}")
WORKER_PYTHON = env("WORKER_PYTHON", torch_python(TORCHRUN))
RUN_TIMEOUT = 60 + 20 * WORK_S * NPROC   # one launcher run, however loaded the machine

WORKER = r'''
import json, os, sys, time
out = sys.argv[1]
start = time.monotonic()
end_cpu = time.process_time() + float(sys.argv[2])
n = 0
while time.process_time() < end_cpu:
    n += 1
wall = time.monotonic() - start
pid = os.getpid()
with open(os.path.join(out, f"rank{os.environ['RANK']}.json"), "w") as f:
    json.dump({"wall": wall, "own_session": os.getsid(0) == pid}, f)
'''

log = Log(SCRIPT)
WORK = make_workdir("mxrun-bench-sessions.")
loads, live = [], set()


def cleanup():
    for proc in loads:
        kill_tree(proc.pid)
        proc.wait()
    for pid in list(live):
        kill_tree(pid)
    shutil.rmtree(WORK, ignore_errors=True)


def one_run(name, argv):
    out = os.path.join(WORK, f"{name.replace(' ', '_')}.{time.monotonic_ns()}")
    os.mkdir(out)
    env_ = dict(os.environ, PYTHON_EXEC=WORKER_PYTHON, OMP_NUM_THREADS="1")
    cmd = argv + ["--standalone", f"--nproc_per_node={NPROC}", os.path.join(WORK, "worker.py"),
                  out, str(WORK_S)]
    proc = subprocess.Popen(cmd, env=env_, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    live.add(proc.pid)
    try:
        _, err = proc.communicate(timeout=RUN_TIMEOUT)
    except subprocess.TimeoutExpired:
        kill_tree(proc.pid)
        proc.communicate()
        log.warn(f"{name}: no exit within {RUN_TIMEOUT:.0f} s; run dropped")
        return None
    finally:
        live.discard(proc.pid)
    ranks = []
    for r in range(NPROC):
        try:
            with open(os.path.join(out, f"rank{r}.json")) as f:
                ranks.append(json.load(f))
        except (OSError, ValueError):
            pass
    if proc.returncode != 0 or len(ranks) != NPROC:
        log.warn(f"{name}: exit {proc.returncode}, {len(ranks)} of {NPROC} workers reported; "
                 f"run dropped ({err.strip().splitlines()[-1:] or ''})")
        return None
    return max(r["wall"] for r in ranks), all(r["own_session"] for r in ranks)


def main():
    with open(os.path.join(WORK, "worker.py"), "w") as f:
        f.write(WORKER)
    launchers = {}
    for name, given in (("mxrun", MXRUN_GIVEN), ("baseline mxrun", BASELINE_GIVEN)):
        if given:
            copy = os.path.join(WORK, name.replace(" ", "_"), "mxrun")
            os.mkdir(os.path.dirname(copy))
            private_copy(given, copy)
            launchers[name] = [copy]
    launchers["torchrun"] = [TORCHRUN]
    with open("/proc/sys/kernel/sched_autogroup_enabled") as f:
        autogroup = f.read().strip()
    e = detect_env(TORCHRUN)
    print("## Workers' share of a loaded machine: mxrun vs torchrun")
    print()
    print(f"- command: `RUNS={RUNS} LOAD={LOAD} NPROC={NPROC} WORK_S={WORK_S_S}"
          + (f" BASELINE_MXRUN={BASELINE_GIVEN}" if BASELINE_GIVEN else "")
          + " scripts/bench/sessions.sh`")
    print(f"- date: {utc_now()}; machine: {machine(e.cpu_model)}; "
          f"sched_autogroup_enabled={autogroup}; load average at start: {loadavg()}")
    print(f"- mxrun: {version_line(launchers['mxrun'][0])} (repo at {e.git_rev}, sha256 "
          f"{sha256_12(launchers['mxrun'][0])}...)"
          + (f"; baseline: {version_line(launchers['baseline mxrun'][0])} (sha256 "
             f"{sha256_12(launchers['baseline mxrun'][0])}...)" if BASELINE_GIVEN else ""))
    print(f"- torchrun: torch {torch_version(e.torch_py)}, workers under "
          f"{python_version(WORKER_PYTHON)}")
    print(f"- {LOAD} busy loops, each in a session of its own, run all along; each run: {NPROC} "
          f"workers burning {WORK_S_S} s of CPU each; figure: the slowest worker's wall time; "
          f"{RUNS} runs per launcher after a warm-up, interleaved; medians")
    print(flush=True)
    for _ in range(LOAD):
        loads.append(subprocess.Popen([sys.executable, "-c", "while True: pass"],
                                      start_new_session=True, stdin=subprocess.DEVNULL))
    time.sleep(1)   # the loops are running before the first run
    results = {name: [] for name in launchers}
    sessions = {name: set() for name in launchers}
    for name, argv in launchers.items():
        log.progress(f"warm-up: {name}")
        one_run(name, argv)
    for i in range(RUNS):
        for name, argv in launchers.items():
            r = one_run(name, argv)
            if r is not None:
                results[name].append(r[0])
                sessions[name].add(r[1])
                log.progress(f"run {i + 1}/{RUNS} {name}: {r[0]:.2f} s, own sessions: {r[1]}")
    ref = median(results["torchrun"])
    print("| launcher | slowest worker's wall time, median (s) | range (s) | vs torchrun | "
          "each worker in its own session |")
    print("|---|---|---|---|---|")
    for name, walls in results.items():
        if not walls:
            print(f"| {name} | no run finished | | | |")
            continue
        own = {True: "yes", False: "no"}.get(next(iter(sessions[name])), "?") \
            if len(sessions[name]) == 1 else "mixed"
        print(f"| {name} | {median(walls):.2f} | {min(walls):.2f}-{max(walls):.2f} | "
              f"{median(walls) / ref:.2f}x | {own} |")
    print()
    print(f"With no other load a worker needs {WORK_S_S} s; the ideal share here is "
          f"{nproc()} CPUs over {LOAD} + {NPROC} sessions.")
    for p in log.problems:
        print(f"- problem: {p}")
    return 0 if all(results.values()) else 1


if __name__ == "__main__":
    run_main(main, cleanup)
