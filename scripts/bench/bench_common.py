"""Python helpers shared by the drivers of scripts/bench/launch.sh, rendezvous.sh and train.sh,
and by etcd_ha.py and recovery.py.

Imported, not run: each script feeds its driver to $PYTHON on stdin and passes its own folder
as the first argument, which the driver puts on sys.path before `from bench_common import ...`;
etcd_ha.py and recovery.py import it from their own folder.
"""
import os, signal, statistics, sys, time

QUIET_BUSY = 0.15   # "idle" means under 15% of all CPU time busy


class Log:
    """Progress lines on stderr, prefixed with the script's name, and the list of problems
    (anomalies) that the report prints at its end."""

    def __init__(self, script):
        self.script = script
        self.problems = []

    def progress(self, msg):
        print(f"{self.script}: {msg}", file=sys.stderr, flush=True)

    def warn(self, msg):
        self.problems.append(msg)
        self.progress("warning: " + msg)


def signal_pid(pid, sig=signal.SIGKILL):
    """Send sig to pid; a process that is gone already is no error."""
    try:
        os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def signal_pids(pids, sig=signal.SIGKILL):
    for pid in pids:
        signal_pid(pid, sig)


def signal_group(pgid, sig=signal.SIGKILL):
    """Send sig to process group pgid; a group that is gone already is no error."""
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def median(xs):
    return statistics.median(xs) if xs else float("nan")


def loadavg():
    """The 1, 5 and 15 minute load averages, as /proc/loadavg writes them."""
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def cpu_busy(window=0.25):
    """Fraction of all CPU time not idle over a short window (other tenants' load)."""
    def snap():
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:]]
        return v[3] + v[4], sum(v)   # idle + iowait, total
    i0, t0 = snap()
    time.sleep(window)
    i1, t1 = snap()
    return 1.0 - (i1 - i0) / max(1, t1 - t0)


# What wait_quiet did, for the report: waits that ended with an idle machine, waits that gave
# up after their limit, and the highest busy fraction seen.
busy_waits = {"waited": 0, "gave_up": 0, "worst": 0.0}


def wait_quiet(limit, progress):
    """Wait (at most limit seconds) until the machine is idle (< QUIET_BUSY busy), so that
    other work does not inflate the figures; limit <= 0: don't wait. Counts in busy_waits."""
    if limit <= 0:
        return
    deadline = time.monotonic() + limit
    waited = False
    while True:
        b = cpu_busy()
        if b < QUIET_BUSY:
            if waited:
                busy_waits["waited"] += 1
            return
        busy_waits["worst"] = max(busy_waits["worst"], b)
        if time.monotonic() >= deadline:
            busy_waits["gave_up"] += 1
            return
        if not waited:
            progress(f"machine busy ({b:.0%} CPU), waiting up to {limit:.0f}s for it to settle")
        waited = True
        time.sleep(1.0)


def print_problems(problems):
    """The report's closing list of problems, if there were any (continuation lines indented
    so that a multi-line message stays one Markdown list item)."""
    if problems:
        print()
        print("Problems seen:")
        print()
        for msg in problems:
            print("- " + msg.replace("\n", "\n  "))


def descendants(pid):
    """Every live descendant of pid (children, grandchildren, ...), from /proc."""
    children = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
                children.setdefault(ppid, []).append(int(d))
            except (OSError, ValueError, IndexError):
                pass
    out, todo = [], [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out


def kill_tree(pid, sig=signal.SIGKILL):
    """sig to pid's process group and to every descendant of pid (and its group). torchrun 2.x
    starts each worker in a session of its own, so killing the launcher's group alone would
    leave its workers running, reparented away from it; read the tree first, then signal."""
    tree = descendants(pid)
    signal_group(pid, sig)
    signal_pid(pid, sig)
    for c in tree:
        signal_group(c, sig)   # a worker that leads its own session or group
        signal_pid(c, sig)


def kill_marked(entry, sig=signal.SIGKILL):
    """sig to every process (but this one) whose environment holds entry ("NAME=value"): the
    backstop for workers whose launcher died before it could stop them (reparented, so no
    longer its descendants)."""
    key = entry.encode()
    for d in os.listdir("/proc"):
        if d.isdigit() and int(d) != os.getpid():
            try:
                with open(f"/proc/{d}/environ", "rb") as f:
                    if key in f.read().split(b"\0"):
                        signal_pid(int(d), sig)
            except OSError:
                pass
