#!/usr/bin/env bash
# Single-node launch benchmark: mxrun against torchrun, side by side.
#
# Measures, for both launchers with the same flags:
#   1. launch-to-exit wall time of
#        --standalone --nproc_per_node=N --no_python /bin/true      (N = 1, 2, 4)
#   2. peak RSS (VmHWM) of the launcher process alone, N = 2
#   3. restart time: SIGKILL of one worker -> every replacement worker running,
#        --standalone --nproc_per_node=2 --max_restarts=1 --no_python sh worker.sh
#   4. mxrun alone, launch-to-exit with torchrun 2.x's newer flags against without (N = 1, 2, 4):
#        the flags of TORCHRUN2_FLAGS below (NUMA binding, virtual local rank, a prefix template,
#        duplicate filters, console event records, the shutdown timeout); target: at most 5% slower
#   5. mxrun alone, launch-to-exit (N = 2) with --metrics_port=0 against without (target: at most
#      10% slower), and without metrics against BASELINE_MXRUN when given (a build from before the
#      metrics: "unchanged" means within the spread of the two)
#
# Prints a Markdown table of medians and torchrun/mxrun ratios on stdout.
#
# Environment:
#   RUNS           measured runs per case (default 10); one unmeasured warm-up
#                  run precedes each case
#   TORCHRUN_RUNS  runs per case for torchrun (default RUNS, at least 5)
#   MXRUN          mxrun binary (default <repo>/build/bin/mxrun)
#   TORCHRUN       torchrun (default <repo>/.venv/bin/torchrun: torchrun 2.13 from the project's venv)
#   PYTHON         python used to drive the measurements (default <repo>/.venv/bin/python3)
#   CASES          which measurements, comma-separated (default launch,rss,restart,flags,metrics)
#   BASELINE_MXRUN an older mxrun build (its folder with mxrun-multinode) for case 5
#   QUIET_WAIT     before each measured iteration, wait at most this many seconds
#                  for the machine to be idle (< 15% CPU busy) (default 120; 0: don't)
#
# Both launchers get the same flags: torchrun 2.13's default --monitor_interval is already 0.1 s.
set -euo pipefail

script_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo_root="$(cd "$script_dir/../.." && pwd)"

RUNS="${RUNS:-10}"
TORCHRUN_RUNS="${TORCHRUN_RUNS:-$RUNS}"
MXRUN="${MXRUN:-$repo_root/build/bin/mxrun}"
TORCHRUN="${TORCHRUN:-$repo_root/.venv/bin/torchrun}"
PYTHON="${PYTHON:-$repo_root/.venv/bin/python3}"
QUIET_WAIT="${QUIET_WAIT:-120}"
CASES="${CASES:-launch,rss,restart,flags,metrics}"
BASELINE_MXRUN="${BASELINE_MXRUN:-}"

case "$RUNS" in ''|*[!0-9]*) echo "launch.sh: RUNS must be a positive integer" >&2; exit 2;; esac
case "$QUIET_WAIT" in ''|*[!0-9]*) echo "launch.sh: QUIET_WAIT must be a whole number of seconds" >&2; exit 2;; esac
case "$TORCHRUN_RUNS" in ''|*[!0-9]*) echo "launch.sh: TORCHRUN_RUNS must be a positive integer" >&2; exit 2;; esac
[ "$RUNS" -ge 1 ] || { echo "launch.sh: RUNS must be >= 1" >&2; exit 2; }
[ "$TORCHRUN_RUNS" -ge 5 ] || TORCHRUN_RUNS=5
[ -x "$MXRUN" ] || { echo "launch.sh: mxrun not found or not executable: $MXRUN (build it: cd build && ninja mxrun)" >&2; exit 2; }
[ -x "$TORCHRUN" ] || { echo "launch.sh: torchrun not found: $TORCHRUN" >&2; exit 2; }
[ -x "$PYTHON" ] || { echo "launch.sh: python not found: $PYTHON" >&2; exit 2; }

workdir="$(mktemp -d "${TMPDIR:-/tmp}/mxrun-bench.XXXXXX")"
cleanup() { rm -rf -- "$workdir"; }
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# Run a private copy of mxrun, so that a rebuild during the benchmark cannot swap or
# remove the binary under it (with mxrun-multinode beside it: a job with metrics runs as that).
mkdir "$workdir/bin"
cp -- "$MXRUN" "$workdir/bin/mxrun"
[ -x "$(dirname "$MXRUN")/mxrun-multinode" ] && cp -- "$(dirname "$MXRUN")/mxrun-multinode" "$workdir/bin/"
# A bundle from scripts/gpu/bundle-mxrun.sh finds its libraries in ../lib (its RPATH): link it.
if [ -d "$(dirname "$MXRUN")/../lib" ]; then ln -s "$(cd "$(dirname "$MXRUN")/../lib" && pwd)" "$workdir/lib"; fi
if [ -n "$BASELINE_MXRUN" ]; then
  mkdir "$workdir/baseline"
  cp -- "$BASELINE_MXRUN" "$workdir/baseline/mxrun"
  [ -x "$(dirname "$BASELINE_MXRUN")/mxrun-multinode" ] && cp -- "$(dirname "$BASELINE_MXRUN")/mxrun-multinode" "$workdir/baseline/"
fi
mxrun_sha="$(sha256sum "$workdir/bin/mxrun" | cut -c1-12)"

# Header: how this was run, and on what.
invocation="RUNS=$RUNS"
[ "$TORCHRUN_RUNS" != "$RUNS" ] && invocation+=" TORCHRUN_RUNS=$TORCHRUN_RUNS"
[ "$QUIET_WAIT" != 120 ] && invocation+=" QUIET_WAIT=$QUIET_WAIT"
[ "$CASES" != launch,rss,restart,flags,metrics ] && invocation+=" CASES=$CASES"
[ -n "$BASELINE_MXRUN" ] && invocation+=" BASELINE_MXRUN=$BASELINE_MXRUN"
[ "$MXRUN" != "$repo_root/build/bin/mxrun" ] && invocation+=" MXRUN=$MXRUN"
[ "$TORCHRUN" != "$repo_root/.venv/bin/torchrun" ] && invocation+=" TORCHRUN=$TORCHRUN"
[ "$PYTHON" != "$repo_root/.venv/bin/python3" ] && invocation+=" PYTHON=$PYTHON"
invocation+=" $0"
[ "$#" -gt 0 ] && invocation+=" $*"
# shellcheck source=scripts/bench/lib.sh
source "$script_dir/lib.sh"
bench_detect_env
echo "## mxrun vs torchrun: single-node launch"
echo
echo "- command: \`$invocation\`"
echo "- date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
echo "- machine: nproc=$(nproc), uname -r=$(uname -r)${cpu_model:+, cpu=$cpu_model}"
echo "- mxrun: \`$MXRUN\` ($("$workdir/bin/mxrun" --version 2>/dev/null | head -n1 || echo unknown), repo at $git_rev, binary sha256 $mxrun_sha...)"
echo "- torchrun: \`$TORCHRUN\` (torch $("$torch_py" -c 'import torch; print(torch.__version__)' 2>/dev/null || echo unknown), $("$torch_py" --version 2>&1))"
echo "- load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "- runs: $RUNS per case for mxrun, $TORCHRUN_RUNS for torchrun, after one warm-up run each, the two launchers interleaved; figures are medians"
echo

export BENCH_RUNS="$RUNS" BENCH_TORCHRUN_RUNS="$TORCHRUN_RUNS" BENCH_MXRUN="$workdir/bin/mxrun" \
       BENCH_TORCHRUN="$TORCHRUN" BENCH_WORKDIR="$workdir" BENCH_QUIET_WAIT="$QUIET_WAIT" \
       BENCH_CASES="$CASES" BENCH_BASELINE="${BASELINE_MXRUN:+$workdir/baseline/mxrun}"

# The measurements themselves are driven from Python for sub-millisecond clocks and
# bounded waits. Every process it starts is tracked by pid and killed by pid. The helpers it
# shares with the other bench scripts are in bench_common.py beside this script.
"$PYTHON" - "$script_dir" <<'PY'
import os, select, signal, subprocess, sys, time

sys.dont_write_bytecode = True
sys.path.insert(0, sys.argv[1])
from bench_common import (Log, busy_waits, loadavg, median, print_problems, signal_pid,
                          wait_quiet)

RUNS = int(os.environ["BENCH_RUNS"])
T_RUNS = int(os.environ["BENCH_TORCHRUN_RUNS"])
MXRUN = os.environ["BENCH_MXRUN"]
TORCHRUN = os.environ["BENCH_TORCHRUN"]
WORK = os.environ["BENCH_WORKDIR"]

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
if os.environ.get("BENCH_BASELINE"):
    METRIC_LAUNCHERS["baseline mxrun"] = ([os.environ["BENCH_BASELINE"]], RUNS)
RUN_TIMEOUT = 60.0   # any single launcher run
POLL = 0.005         # restart-file polling period
WAIT_LIMIT = 30.0    # any wait for worker files
QUIET_WAIT = float(os.environ["BENCH_QUIET_WAIT"])
CASES = set(os.environ["BENCH_CASES"].split(","))
unknown = CASES - {"launch", "rss", "restart", "flags", "metrics"}
if unknown:
    sys.exit(f"launch.sh: unknown CASES {sorted(unknown)}; accepted: launch, rss, restart, flags, "
             "metrics")

log = Log("launch.sh")
problems = log.problems   # anomalies seen (non-zero exit codes, timeouts, ...)
note, progress = log.warn, log.progress
live = set()         # pids of processes we started that may still be running


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


# ---------------------------------------------------------------- 1. launch time
def launch_time(base, n):
    cmd = base + ["--standalone", f"--nproc_per_node={n}", "--no_python", "/bin/true"]
    t = time.perf_counter()
    p = start(cmd)
    rc, timed_out = reap(p, RUN_TIMEOUT)
    dt = time.perf_counter() - t
    if timed_out:
        note(f"{os.path.basename(base[0])} N={n}: no exit within {RUN_TIMEOUT:.0f}s, killed")
        return None
    if rc != 0:
        note(f"{os.path.basename(base[0])} N={n}: exit code {rc} (expected 0)")
    return dt


# ---------------------------------------------------------------- 2. peak RSS
def status_kib(pid, key):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except (FileNotFoundError, ProcessLookupError):
        pass
    return None   # gone, or a zombie (no mm any more)


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
    name = os.path.basename(base[0])
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


def print_flag_rows(flag_rows, fmt):
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


# ---------------------------------------------------------------- driver
def measure(label, fn, launchers=LAUNCHERS):
    """fn(launcher_name) -> value or None. Interleaves the launchers run by run, so
    that both see the same background load; one warm-up run each, not counted.
    Before each measured iteration, waits (at most QUIET_WAIT s) for an idle machine."""
    for lname in launchers:
        fn(lname)
    xs = {lname: [] for lname in launchers}
    for i in range(max(runs for _, runs in launchers.values())):
        wait_quiet(QUIET_WAIT, progress)
        for lname, (_, runs) in launchers.items():
            if i < runs:
                v = fn(lname)
                if v is not None:
                    xs[lname].append(v)
    for lname, (_, runs) in launchers.items():
        progress(f"{label} {lname}: {len(xs[lname])}/{runs} valid runs")
    return xs


def main():
    rows = []   # (label, {launcher: [values]}, target ratio)
    base = {lname: b for lname, (b, _) in LAUNCHERS.items()}

    for n in (1, 2, 4) if "launch" in CASES else ():
        xs = measure(f"launch N={n}", lambda l: launch_time(base[l], n))
        rows.append((f"launch-to-exit, N={n} (ms)",
                     {l: [v * 1000.0 for v in vs] for l, vs in xs.items()}, 20))

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

    def fmt(v):
        if v != v:
            return "n/a"
        return f"{v:.1f}" if v < 100 else f"{v:.0f}"

    def print_metric_rows():
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
            spread = f"{fmt(min(vs))} - {fmt(max(vs))}" if vs else "n/a"
            print(f"| {l} | {fmt(m)} | {spread} | {'n/a' if ratio != ratio else f'{ratio:.3f}'} |")
        print()

    if not rows:
        print_flag_rows(flag_rows, fmt)
        print_metric_rows()
        print_end()
        return
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
        cells = []
        for l in ("mxrun", "torchrun"):
            vs = vals[l]
            cells.append(f"{fmt(min(vs))} - {fmt(max(vs))}" if vs else "n/a")
        print(f"| {label} | {cells[0]} | {cells[1]} |")
    print()
    print("Commands (the same flags for both launchers):")
    print()
    print("- launch: `LAUNCHER --standalone --nproc_per_node=N --no_python /bin/true`")
    print("- peak RSS: `LAUNCHER --standalone --nproc_per_node=2 --no_python sh -c 'sleep 0.3'`,"
          " max of /proc/<launcher pid>/status VmHWM sampled every 1 ms")
    print("- restart: `LAUNCHER --standalone --nproc_per_node=2 --max_restarts=1 --no_python sh worker.sh DIR`,"
          " SIGKILL to local rank 0, time until both attempt-1 workers have started")
    print()
    print_flag_rows(flag_rows, fmt)
    print_metric_rows()
    print_end()


def print_end():
    print("Load average at end: " + loadavg() + "; "
          f"iterations that waited for an idle machine: {busy_waits['waited']}, "
          f"that ran on a busy one after {QUIET_WAIT:.0f}s: {busy_waits['gave_up']}")
    if busy_waits["gave_up"]:
        note(f"{busy_waits['gave_up']} iteration(s) ran while other work used up to "
             f"{busy_waits['worst']:.0%} of the CPU; timings may be inflated")
    print_problems(problems)


try:
    main()
finally:
    for pid in list(live):
        signal_pid(pid)
PY
