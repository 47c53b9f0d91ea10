#!/usr/bin/env python3
"""Single-node launch benchmark: mxrun against torchrun, side by side.

Measures, for both launchers with the same flags:
  1. launch-to-exit wall time of
       --standalone --nproc_per_node=N --no_python /bin/true      (N = 1, 2, 4)
  2. peak RSS (VmHWM) of the launcher process alone, N = 2
  3. restart time: SIGKILL of one worker -> every replacement worker running,
       --standalone --nproc_per_node=2 --max_restarts=1 --no_python sh worker.sh
  4. mxrun alone, launch-to-exit with torchrun 2.x's newer flags against without (N = 1, 2, 4):
       the flags of TORCHRUN2_FLAGS below (NUMA binding, virtual local rank, a prefix template,
       duplicate filters, console event records, the shutdown timeout); target: at most 5% slower
  5. mxrun alone, launch-to-exit (N = 2) with --metrics_port=0 against without (target: at most
     10% slower), and without metrics against BASELINE_MXRUN when given (a build from before the
     metrics: "unchanged" means within the spread of the two)
  baseline (not in the default CASES; needs BASELINE_MXRUN): the current mxrun against an older
     build, interleaved run by run (the one going first alternates): launch-to-exit (N = 1, 2, 4)
     as in 1, peak RSS (N = 2) as in 2 and the restart time as in 3, medians and the ratio
     new/old; target: within 5% of the baseline (new/old <= 1.05; below 1 is better)

Prints a Markdown table of medians and torchrun/mxrun ratios on stdout; progress on stderr.

Environment:
  RUNS           measured runs per case (default 10); one unmeasured warm-up
                 run precedes each case
  TORCHRUN_RUNS  runs per case for torchrun (default RUNS, at least 5)
  MXRUN          mxrun binary (default <repo>/build/bin/mxrun)
  TORCHRUN       torchrun (default <repo>/.venv/bin/torchrun: torchrun 2.13 from the project's venv)
  CASES          which measurements, comma-separated (default launch,rss,restart,flags,metrics;
                 also: baseline)
  BASELINE_MXRUN an older mxrun build (its folder with mxrun-multinode), for cases 5 and baseline
  QUIET_WAIT     before each measured iteration, wait at most this many seconds
                 for the machine to be idle (< 15% CPU busy) (default 120; 0: don't)
  SAMPLES_DIR    where the launch and restart samples go for the documents' plots
                 (default <repo>/docs/data; off: nowhere; scripts/bench/samples.py)
launch.sh runs it with $PYTHON (default <repo>/.venv/bin/python3, the project's venv), which
drives the measurements.

Both launchers get the same flags: torchrun 2.13's default --monitor_interval is already 0.1 s.
mxrun (and BASELINE_MXRUN) run as private copies, so that a rebuild during the benchmark cannot
swap or remove the binary under it. Every process it starts is tracked by pid and killed by pid.
"""
import itertools
import os
import select
import shutil
import signal
import subprocess
import sys
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_common import (DEFAULT_MXRUN, DEFAULT_PYTHON, DEFAULT_TORCHRUN, Log,  # noqa: E402
                          detect_env, die, env, executable, is_whole, link_bundle_lib, loadavg,
                          machine, make_workdir, median, print_busy_waits, print_problems,
                          private_copy, python_version, run_main, sha256_12, signal_pid,
                          status_kib, torch_version, utc_now, version_line, wait_quiet)
from samples import keep  # noqa: E402

SCRIPT = "launch.sh"
DEFAULT_CASES = "launch,rss,restart,flags,metrics"
ALL_CASES = ("launch", "rss", "restart", "flags", "metrics", "baseline")


def fail(msg):
    die(SCRIPT, msg)


# ---------------------------------------------------------------- settings
RUNS_S = env("RUNS", "10")
TORCHRUN_RUNS_S = env("TORCHRUN_RUNS", RUNS_S)
MXRUN_GIVEN = env("MXRUN", DEFAULT_MXRUN)
TORCHRUN = env("TORCHRUN", DEFAULT_TORCHRUN)
QUIET_WAIT_S = env("QUIET_WAIT", "120")
CASES_S = env("CASES", DEFAULT_CASES)
BASELINE_GIVEN = env("BASELINE_MXRUN", "")

if not is_whole(RUNS_S):
    fail("RUNS must be a positive integer")
if not is_whole(QUIET_WAIT_S):
    fail("QUIET_WAIT must be a whole number of seconds")
if not is_whole(TORCHRUN_RUNS_S):
    fail("TORCHRUN_RUNS must be a positive integer")
RUNS, T_RUNS = int(RUNS_S), max(5, int(TORCHRUN_RUNS_S))
if RUNS < 1:
    fail("RUNS must be >= 1")
CASES = set(CASES_S.split(","))
unknown = CASES - set(ALL_CASES)
if unknown:
    fail(f"unknown CASES {sorted(unknown)}; accepted: {', '.join(ALL_CASES)}")
if "baseline" in CASES and not BASELINE_GIVEN:
    fail("CASES=baseline needs BASELINE_MXRUN (an older mxrun build to compare with)")
if not executable(MXRUN_GIVEN):
    fail(f"mxrun not found or not executable: {MXRUN_GIVEN} (build it: cd build && ninja mxrun)")
if not executable(TORCHRUN):
    fail(f"torchrun not found: {TORCHRUN}")
if BASELINE_GIVEN and not executable(BASELINE_GIVEN):
    fail(f"baseline mxrun not found or not executable: {BASELINE_GIVEN}")
QUIET_WAIT = float(QUIET_WAIT_S)

WORK = make_workdir("mxrun-bench.")
# The private copies (copy_binaries), run instead of the binaries given.
MXRUN = os.path.join(WORK, "bin", "mxrun")
BASELINE = os.path.join(WORK, "baseline", "mxrun") if BASELINE_GIVEN else None

LAUNCHERS = {
    "mxrun": ([MXRUN], RUNS),
    "torchrun": ([TORCHRUN], T_RUNS),
}
# 4.: the same mxrun with torchrun 2.x's newer flags (event records go to the bench's /dev/null).
TORCHRUN2_FLAGS = ["--numa-binding=node", "--virtual-local-rank",
                   "--log-line-prefix-template=[${role_name}${local_rank}]:",
                   "--duplicate-stdout-filters=loss,,grad", "--event-log-handler=console",
                   "--shutdown-timeout=30", "--log_dir=" + os.path.join(WORK, "logs")]
FLAG_LAUNCHERS = {
    "mxrun": ([MXRUN], RUNS),
    "mxrun + 2.x flags": ([MXRUN] + TORCHRUN2_FLAGS, RUNS),
}
# 5.: metrics on against off, and off against an older build when one is given.
METRIC_LAUNCHERS = {
    "mxrun": ([MXRUN], RUNS),
    "mxrun + metrics": ([MXRUN, "--metrics_port=0"], RUNS),
}
if BASELINE:
    METRIC_LAUNCHERS["baseline mxrun"] = ([BASELINE], RUNS)
# baseline: the older build against this one, both without metrics.
BASELINE_LAUNCHERS = {
    "baseline mxrun": ([BASELINE], RUNS),
    "mxrun": ([MXRUN], RUNS),
}
BASELINE_TARGET = 1.05   # new/old: at most 5% above the baseline build
RUN_TIMEOUT = 60.0   # any single launcher run
POLL = 0.005         # restart-file polling period
WAIT_LIMIT = 30.0    # any wait for worker files

log = Log(SCRIPT)
problems = log.problems   # anomalies seen (non-zero exit codes, timeouts, ...)
note, progress = log.warn, log.progress
live = set()         # pids of processes we started that may still be running


def copy_binaries():
    """Private copies of mxrun (and of the baseline build), so that a rebuild during the benchmark
    cannot swap or remove the binary under it (with mxrun-multinode beside it: a job with metrics
    runs as that)."""
    for given, copy in ((MXRUN_GIVEN, MXRUN), (BASELINE_GIVEN, BASELINE)):
        if not given:
            continue
        os.mkdir(os.path.dirname(copy))
        private_copy(given, copy)
        multinode = os.path.join(os.path.dirname(given), "mxrun-multinode")
        if executable(multinode):
            private_copy(multinode, os.path.join(os.path.dirname(copy), "mxrun-multinode"))
    link_bundle_lib(MXRUN_GIVEN, WORK)


def print_header():
    """How this was run, and on what."""
    invocation = f"RUNS={RUNS}"
    if T_RUNS != RUNS:
        invocation += f" TORCHRUN_RUNS={T_RUNS}"
    if QUIET_WAIT_S != "120":
        invocation += f" QUIET_WAIT={QUIET_WAIT_S}"
    if CASES_S != DEFAULT_CASES:
        invocation += f" CASES={CASES_S}"
    if BASELINE_GIVEN:
        invocation += f" BASELINE_MXRUN={BASELINE_GIVEN}"
    if MXRUN_GIVEN != DEFAULT_MXRUN:
        invocation += f" MXRUN={MXRUN_GIVEN}"
    if TORCHRUN != DEFAULT_TORCHRUN:
        invocation += f" TORCHRUN={TORCHRUN}"
    if sys.executable != DEFAULT_PYTHON:
        invocation += f" PYTHON={sys.executable}"
    invocation += " scripts/bench/launch.sh" + "".join(" " + a for a in sys.argv[1:])
    e = detect_env(TORCHRUN)
    print("## mxrun vs torchrun: single-node launch")
    print()
    print(f"- command: `{invocation}`")
    print(f"- date: {utc_now()}")
    print(f"- machine: {machine(e.cpu_model)}")
    print(f"- mxrun: `{MXRUN_GIVEN}` ({version_line(MXRUN)}, repo at {e.git_rev}, binary sha256 "
          f"{sha256_12(MXRUN)}...)")
    if BASELINE:
        print(f"- baseline mxrun: `{BASELINE_GIVEN}` ({version_line(BASELINE)}, binary sha256 "
              f"{sha256_12(BASELINE)}...)")
    print(f"- torchrun: `{TORCHRUN}` (torch {torch_version(e.torch_py)}, "
          f"{python_version(e.torch_py)})")
    print(f"- load average at start: {loadavg()}")
    print(f"- runs: {RUNS} per case for mxrun, {T_RUNS} for torchrun, after one warm-up run each, "
          "the two launchers interleaved; figures are medians")
    print(flush=True)


def wait_exit(proc, timeout):
    """Block until proc exits or timeout seconds pass; True if it exited.
    Popen.wait(timeout=...) polls with an exponential back-off (up to 50 ms steps),
    which would quantise the launch times, so wait on a pidfd instead."""
    if proc.returncode is not None:
        return True
    try:
        fd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):
        try:
            proc.wait(timeout=timeout)
            return True
        except subprocess.TimeoutExpired:
            return False
    try:
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        return bool(poller.poll(max(0, int(timeout * 1000))))
    finally:
        os.close(fd)


def reap(proc, timeout):
    """Wait for proc at most timeout seconds; SIGKILL it (by pid) past that."""
    try:
        if not wait_exit(proc, timeout):
            raise subprocess.TimeoutExpired(proc.args, timeout)
        rc = proc.wait()
    except subprocess.TimeoutExpired:
        signal_pid(proc.pid)
        rc = proc.wait(timeout=10)
        live.discard(proc.pid)
        return rc, True
    live.discard(proc.pid)
    return rc, False


def start(cmd, **kw):
    p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, cwd=WORK, **kw)
    live.add(p.pid)
    return p


def who(base):
    """The launcher's name in problem lines ("mxrun", "torchrun"; the baseline build's copy
    lives in a folder of its own)."""
    return ("baseline " if base[0] == BASELINE else "") + os.path.basename(base[0])


# ---------------------------------------------------------------- 1. launch time
def launch_time(base, n):
    cmd = base + ["--standalone", f"--nproc_per_node={n}", "--no_python", "/bin/true"]
    t = time.perf_counter()
    p = start(cmd)
    rc, timed_out = reap(p, RUN_TIMEOUT)
    dt = time.perf_counter() - t
    if timed_out:
        note(f"{who(base)} N={n}: no exit within {RUN_TIMEOUT:.0f}s, killed")
        return None
    if rc != 0:
        note(f"{who(base)} N={n}: exit code {rc} (expected 0)")
    return dt


# ---------------------------------------------------------------- 2. peak RSS
def peak_rss(base):
    # Workers sleep 0.3 s so the launcher is sampled through its whole steady state;
    # VmHWM is a high-water mark of the launcher's own address space, so worker
    # memory is never included (unlike /usr/bin/time %M, which folds in the
    # max RSS of reaped descendants).
    cmd = base + ["--standalone", "--nproc_per_node=2", "--no_python", "sh", "-c", "sleep 0.3"]
    p = start(cmd)
    best = None
    deadline = time.monotonic() + RUN_TIMEOUT
    while p.poll() is None and time.monotonic() < deadline:
        v = status_kib(p.pid, "VmHWM")
        if v is not None:
            best = v if best is None else max(best, v)
        time.sleep(0.001)
    rc, timed_out = reap(p, 0 if p.returncode is None else 1)
    name = who(base)
    if timed_out:
        note(f"{name} RSS run: no exit within {RUN_TIMEOUT:.0f}s, killed")
        return None
    if rc != 0:
        note(f"{name} RSS run: exit code {rc} (expected 0)")
    return best


# ---------------------------------------------------------------- 3. restart time
WORKER = r'''#!/bin/sh
# Same worker for both launchers. Start files are written atomically (tmp + mv).
d="$1"
a="${TORCHELASTIC_RESTART_COUNT:?}"
r="${LOCAL_RANK:?}"
echo $$ > "$d/pid.$a.$r.tmp" && mv "$d/pid.$a.$r.tmp" "$d/pid.$a.$r"
date +%s.%N > "$d/start.$a.$r.tmp" && mv "$d/start.$a.$r.tmp" "$d/start.$a.$r"
if [ "$a" = 0 ]; then
    # exec: the pid written above becomes sleep itself, so SIGKILL from the bench
    # and SIGTERM from the launcher hit it directly and stop it at once.
    exec sleep 120
fi
exit 0
'''


def wait_files(paths, limit=WAIT_LIMIT):
    deadline = time.monotonic() + limit
    while True:
        if all(os.path.exists(x) for x in paths):
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(POLL)


def read_float(path):
    with open(path) as f:
        return float(f.read().strip())


def kill_workers(d):
    # Only pids that still run one of this run's workers (guards against pid reuse).
    for name in os.listdir(d):
        if name.startswith("pid.") and not name.endswith(".tmp"):
            try:
                pid = int(open(os.path.join(d, name)).read().strip())
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    argv = f.read().split(b"\0")
            except (ValueError, OSError):
                continue
            if argv[:2] == [b"sleep", b"120"] or d.encode() in argv:
                signal_pid(pid)


def restart_time(base, idx):
    name = os.path.basename(base[0])
    d = os.path.join(WORK, f"restart-{name}-{idx}")
    os.mkdir(d)
    worker = os.path.join(d, "worker.sh")
    with open(worker, "w") as f:
        f.write(WORKER)
    cmd = base + ["--standalone", "--nproc_per_node=2", "--max_restarts=1",
                  "--no_python", "sh", worker, d]
    p = start(cmd)
    result = None
    try:
        a0 = [os.path.join(d, f"start.0.{r}") for r in (0, 1)]
        a1 = [os.path.join(d, f"start.1.{r}") for r in (0, 1)]
        if not wait_files(a0):
            note(f"{name} restart run {idx}: attempt-0 workers not up within {WAIT_LIMIT:.0f}s")
            return None
        victim = int(open(os.path.join(d, "pid.0.0")).read().strip())
        t0 = time.time()
        os.kill(victim, signal.SIGKILL)
        if not wait_files(a1):
            note(f"{name} restart run {idx}: replacement workers not up within {WAIT_LIMIT:.0f}s")
            return None
        result = max(read_float(x) for x in a1) - t0
        rc, timed_out = reap(p, RUN_TIMEOUT)
        if timed_out:
            note(f"{name} restart run {idx}: no exit within {RUN_TIMEOUT:.0f}s after restart, killed")
        elif rc != 0:
            note(f"{name} restart run {idx}: exit code {rc} (expected 0 after a successful restart)")
        return result
    finally:
        if p.poll() is None:
            signal_pid(p.pid)
            p.wait(timeout=10)
        live.discard(p.pid)
        kill_workers(d)


# ---------------------------------------------------------------- report
def fmt(v):
    if v != v:
        return "n/a"
    return f"{v:.1f}" if v < 100 else f"{v:.0f}"


def spread(vs):
    return f"{fmt(min(vs))} - {fmt(max(vs))}" if vs else "n/a"


def print_flag_rows(flag_rows):
    if not flag_rows:
        return
    print()
    print("torchrun 2.x's newer flags: mxrun with them against without (target: at most 5% slower)")
    print()
    print("| metric (median) | mxrun | mxrun + 2.x flags | with/without | target | met |")
    print("|---|---:|---:|---:|---:|:---:|")
    for label, vals in flag_rows:
        m, f = median(vals["mxrun"]), median(vals["mxrun + 2.x flags"])
        ratio = f / m if m == m and f == f and m > 0 else float("nan")
        met = "n/a" if ratio != ratio else ("yes" if ratio <= 1.05 else "no")
        rs = "n/a" if ratio != ratio else f"{ratio:.3f}"
        print(f"| {label} | {fmt(m)} | {fmt(f)} | {rs} | <= 1.05 | {met} |")
    print()
    print("- 2.x flags: `mxrun " + " ".join(TORCHRUN2_FLAGS[:-1]) +
          " --log_dir=DIR --standalone --nproc_per_node=N --no_python /bin/true`")
    print()


def print_metric_rows(metric_rows):
    if not metric_rows:
        return
    print()
    print("Metrics endpoint: launch-to-exit, N=2, medians in ms (target: with metrics at most "
          "10% slower; without, unchanged against the baseline build)")
    print()
    print("| launcher | median (ms) | min - max | against mxrun without metrics |")
    print("|---|---:|---:|---:|")
    base = median(metric_rows["mxrun"])
    for l, vs in metric_rows.items():
        m = median(vs)
        ratio = m / base if base == base and base > 0 and m == m else float("nan")
        print(f"| {l} | {fmt(m)} | {spread(vs)} | {'n/a' if ratio != ratio else f'{ratio:.3f}'} |")
    print()


def print_baseline_rows(baseline_rows):
    if not baseline_rows:
        return
    print()
    print("Against the baseline build: the current mxrun and BASELINE_MXRUN interleaved run by run "
          "(the one going first alternating); target: within 5% of the baseline (new/old at most "
          f"{BASELINE_TARGET:.2f}; below 1: better than before)")
    print()
    print("| metric (median) | baseline mxrun | mxrun | new/old | target | met |")
    print("|---|---:|---:|---:|---:|:---:|")
    for label, vals in baseline_rows:
        o, n = median(vals["baseline mxrun"]), median(vals["mxrun"])
        ratio = n / o if o == o and n == n and o > 0 else float("nan")
        met = "n/a" if ratio != ratio else ("yes" if ratio <= BASELINE_TARGET else "no")
        rs = "n/a" if ratio != ratio else f"{ratio:.3f}"
        print(f"| {label} | {fmt(o)} | {fmt(n)} | {rs} | <= {BASELINE_TARGET:.2f} | {met} |")
    print()
    print("| metric (min - max) | baseline mxrun | mxrun |")
    print("|---|---:|---:|")
    for label, vals in baseline_rows:
        print(f"| {label} | {spread(vals['baseline mxrun'])} | {spread(vals['mxrun'])} |")
    print()
    print("- launch-to-exit: `LAUNCHER --standalone --nproc_per_node=N --no_python /bin/true`; "
          "peak RSS: `LAUNCHER --standalone --nproc_per_node=2 --no_python sh -c 'sleep 0.3'`, "
          "max of /proc/<launcher pid>/status VmHWM sampled every 1 ms; LAUNCHER: a private copy "
          "of each build")
    print()


# ---------------------------------------------------------------- driver
def measure(label, fn, launchers=LAUNCHERS, alternate=False):
    """fn(launcher_name) -> value or None. Interleaves the launchers run by run, so
    that both see the same background load; one warm-up run each, not counted.
    Before each measured iteration, waits (at most QUIET_WAIT s) for an idle machine.
    alternate: every other iteration runs the launchers in the opposite order."""
    for lname in launchers:
        fn(lname)
    xs = {lname: [] for lname in launchers}
    for i in range(max(runs for _, runs in launchers.values())):
        wait_quiet(QUIET_WAIT, progress)
        order = list(launchers.items())
        if alternate and i % 2:
            order.reverse()
        for lname, (_, runs) in order:
            if i < runs:
                v = fn(lname)
                if v is not None:
                    xs[lname].append(v)
    for lname, (_, runs) in launchers.items():
        progress(f"{label} {lname}: {len(xs[lname])}/{runs} valid runs")
    return xs


def main():
    copy_binaries()
    print_header()
    rows = []   # (label, {launcher: [values]}, target ratio)
    launch_cases = []  # the same samples, for the plot (scripts/bench/samples.py)
    base = {lname: b for lname, (b, _) in LAUNCHERS.items()}

    for n in (1, 2, 4) if "launch" in CASES else ():
        xs = measure(f"launch N={n}", lambda l: launch_time(base[l], n))
        ms = {l: [v * 1000.0 for v in vs] for l, vs in xs.items()}
        rows.append((f"launch-to-exit, N={n} (ms)", ms, 20))
        launch_cases.append({"case": f"{n} worker{'s' if n > 1 else ''}", "x": n, "samples": ms})

    if "rss" in CASES:
        xs = measure("peak RSS", lambda l: peak_rss(base[l]))
        rows.append(("launcher peak RSS, N=2 (MiB)",
                     {l: [v / 1024.0 for v in vs] for l, vs in xs.items()}, 20))

    if "restart" in CASES:
        counter = iter(range(10**6))
        xs = measure("restart", lambda l: restart_time(base[l], next(counter)))
        rows.append(("restart, SIGKILL to all replacements running, N=2 (ms)",
                     {l: [v * 1000.0 for v in vs] for l, vs in xs.items()}, 5))

    flag_rows = []
    flag_base = {lname: b for lname, (b, _) in FLAG_LAUNCHERS.items()}
    for n in (1, 2, 4) if "flags" in CASES else ():
        xs = measure(f"2.x flags N={n}", lambda l: launch_time(flag_base[l], n), FLAG_LAUNCHERS)
        flag_rows.append((f"launch-to-exit, N={n} (ms)",
                          {l: [v * 1000.0 for v in vs] for l, vs in xs.items()}))

    metric_rows = []
    metric_base = {lname: b for lname, (b, _) in METRIC_LAUNCHERS.items()}
    if "metrics" in CASES:
        xs = measure("metrics N=2", lambda l: launch_time(metric_base[l], 2), METRIC_LAUNCHERS)
        metric_rows = {l: [v * 1000.0 for v in vs] for l, vs in xs.items()}

    baseline_rows = []
    old_new = {lname: b for lname, (b, _) in BASELINE_LAUNCHERS.items()}
    for n in (1, 2, 4) if "baseline" in CASES else ():
        xs = measure(f"baseline N={n}", lambda l: launch_time(old_new[l], n), BASELINE_LAUNCHERS,
                     alternate=True)
        baseline_rows.append((f"launch-to-exit, N={n} (ms)",
                              {l: [v * 1000.0 for v in vs] for l, vs in xs.items()}))
    if "baseline" in CASES:
        xs = measure("baseline peak RSS", lambda l: peak_rss(old_new[l]), BASELINE_LAUNCHERS,
                     alternate=True)
        baseline_rows.append(("launcher peak RSS, N=2 (MiB)",
                              {l: [v / 1024.0 for v in vs] for l, vs in xs.items()}))
        restarts = itertools.count(1000)
        xs = measure("baseline restart", lambda l: restart_time(old_new[l], next(restarts)),
                     BASELINE_LAUNCHERS, alternate=True)
        baseline_rows.append(("restart, SIGKILL to all replacements running, N=2 (ms)",
                              {l: [v * 1000.0 for v in vs] for l, vs in xs.items()}))

    command = f"RUNS={RUNS} CASES={CASES_S} scripts/bench/launch.sh"
    if launch_cases:
        keep("launch", launch_cases, command, "ms",
             "launch to exit: --standalone --nproc_per_node=N --no_python /bin/true")
    restart_rows = [r for r in rows if r[0].startswith("restart")]
    if restart_rows:
        keep("restart", [{"case": "2 workers", "x": 2, "samples": restart_rows[0][1]}], command, "ms",
             "SIGKILL of one worker to every replacement running, --max_restarts=1")
    if rows:
        print("| metric (median) | mxrun | torchrun | torchrun/mxrun | target | met |")
        print("|---|---:|---:|---:|---:|:---:|")
        for label, vals, target in rows:
            m, t = median(vals["mxrun"]), median(vals["torchrun"])
            ratio = t / m if m == m and t == t and m > 0 else float("nan")
            met = "n/a" if ratio != ratio else ("yes" if ratio >= target else "no")
            rs = "n/a" if ratio != ratio else f"{ratio:.1f}x"
            print(f"| {label} | {fmt(m)} | {fmt(t)} | {rs} | >= {target}x | {met} |")
        print()
        print("Spread (min - max over the measured runs):")
        print()
        print("| metric | mxrun | torchrun |")
        print("|---|---:|---:|")
        for label, vals, _ in rows:
            print(f"| {label} | {spread(vals['mxrun'])} | {spread(vals['torchrun'])} |")
        print()
        print("Commands (the same flags for both launchers):")
        print()
        print("- launch: `LAUNCHER --standalone --nproc_per_node=N --no_python /bin/true`")
        print("- peak RSS: `LAUNCHER --standalone --nproc_per_node=2 --no_python sh -c 'sleep 0.3'`,"
              " max of /proc/<launcher pid>/status VmHWM sampled every 1 ms")
        print("- restart: `LAUNCHER --standalone --nproc_per_node=2 --max_restarts=1 --no_python sh worker.sh DIR`,"
              " SIGKILL to local rank 0, time until both attempt-1 workers have started")
        print()
    print_flag_rows(flag_rows)
    print_metric_rows(metric_rows)
    print_baseline_rows(baseline_rows)
    print_busy_waits(QUIET_WAIT, "iterations", "iteration(s) ran", "timings may be inflated", note)
    print_problems(problems)


def cleanup():
    for pid in list(live):
        signal_pid(pid)
    shutil.rmtree(WORK, ignore_errors=True)


if __name__ == "__main__":
    run_main(main, cleanup)
