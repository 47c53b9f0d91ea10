"""Python helpers shared by the benchmarks in scripts/bench/ (launch.py, rendezvous.py, train.py,
master_scale.py, hang.py, faults.py, etcd_ha.py, recovery.py): settings read from the environment,
the provenance lines every report starts with, private copies of the binaries, waits and process
clean-up.

Imported, not run: each benchmark puts its own folder on sys.path before
`from bench_common import ...`; its .sh beside it only execs it under $PYTHON.
"""
import hashlib, os, re, shutil, signal, socket, statistics, subprocess, sys, tempfile, time
from types import SimpleNamespace

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEFAULT_MXRUN = os.path.join(REPO, "build/bin/mxrun")
DEFAULT_TORCHRUN = os.path.join(REPO, ".venv/bin/torchrun")   # torchrun 2.13 from the venv
DEFAULT_PYTHON = os.path.join(REPO, ".venv/bin/python3")      # the wrappers' default $PYTHON

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


def print_busy_waits(quiet_wait, counted, gave_up_what, effect, note):
    """The report's line on the load and on wait_quiet's waits (`counted`: what was measured,
    "iterations"); a note when some ran on a busy machine (`gave_up_what`: "iteration(s) ran",
    `effect`: what that does to the figures)."""
    print("Load average at end: " + loadavg() + "; "
          f"{counted} that waited for an idle machine: {busy_waits['waited']}, "
          f"that ran on a busy one after {quiet_wait:.0f}s: {busy_waits['gave_up']}")
    if busy_waits["gave_up"]:
        note(f"{busy_waits['gave_up']} {gave_up_what} while other work used up to "
             f"{busy_waits['worst']:.0%} of the CPU; {effect}")


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
    signal_pids(pids_marked(entry), sig)


def pids_marked(entry):
    """Pids of the live processes (but this one) whose environment holds entry ("NAME=value")."""
    key = entry.encode()
    me = os.getpid()
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit() and int(d) != me:
            try:
                with open(f"/proc/{d}/environ", "rb") as f:
                    if key in f.read().split(b"\0"):
                        out.append(int(d))
            except OSError:
                pass
    return out


def wait_until(pred, timeout, abort=None, poll=0.005):
    """Poll pred every poll seconds until it is true (return its value), timeout seconds pass or
    abort() is true (return None)."""
    deadline = time.monotonic() + timeout
    while True:
        r = pred()
        if r:
            return r
        if time.monotonic() >= deadline or (abort is not None and abort()):
            return None
        time.sleep(poll)


def status_kib(pid, key):
    """A "key: N kB" field of /proc/pid/status (VmHWM, VmRSS, ...) in KiB; None when the process is
    gone or a zombie (no memory any more)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return None


def free_port():
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
    finally:
        s.close()


# ---------------------------------------------------------------- settings and start-up

def die(script, msg):
    """A setting or a binary that is wrong: the message on stderr, exit status 2."""
    print(f"{script}: {msg}", file=sys.stderr, flush=True)
    sys.exit(2)


def env(name, default):
    """$name, or default when it is unset or empty (the shell's ${name:-default})."""
    return os.environ.get(name) or default


def is_whole(text):
    """True for a whole number written in ASCII digits only (the shell's ''|*[!0-9]* test)."""
    return re.fullmatch(r"[0-9]+", text) is not None


def executable(path):
    return os.path.isfile(path) and os.access(path, os.X_OK)


def run_main(main, cleanup=None):
    """Run main() as a benchmark's body and exit with its return value (None: 0). SIGTERM ends it
    with status 143 and Ctrl-C with 130, as the shell scripts' traps did; cleanup() runs however it
    ends, with SIGINT and SIGTERM held off so that a second one cannot cut it short."""
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    rc = 1
    try:
        rc = main()
    except KeyboardInterrupt:
        rc = 130
    finally:
        if cleanup is not None:
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            cleanup()
    sys.exit(rc or 0)


def make_workdir(prefix):
    """A fresh folder under $TMPDIR (default /tmp), named prefix + random letters."""
    return tempfile.mkdtemp(prefix=prefix, dir=os.environ.get("TMPDIR") or "/tmp")


def private_copy(src, dst):
    """Copy binary src to dst (a file name; its mode too), so that a rebuild during the benchmark
    cannot swap or remove it under the benchmark."""
    shutil.copy(src, dst)
    return dst


def link_bundle_lib(binary, workdir):
    """A bundle from scripts/gpu/bundle-mxrun.sh finds its libraries in ../lib (its RPATH): when
    binary's folder has a ../lib, link it as workdir/lib so that the private copies in workdir/bin
    find it too."""
    lib = os.path.join(os.path.dirname(os.path.abspath(binary)), "..", "lib")
    if os.path.isdir(lib):
        os.symlink(os.path.normpath(lib), os.path.join(workdir, "lib"))


# ---------------------------------------------------------------- provenance

def torch_python(torchrun, fallback=None):
    """The interpreter on torchrun's #! line (its first word), where that is executable;
    otherwise fallback (default: this Python)."""
    try:
        with open(torchrun, "rb") as f:
            first = f.readline().decode(errors="replace")
    except OSError:
        first = ""
    py = first[2:].lstrip().rstrip("\r\n").split(" ")[0] if first.startswith("#!") else ""
    if py and os.access(py, os.X_OK):
        return py
    return fallback or sys.executable


def git_rev(repo=REPO, mark_modified=True):
    """HEAD's short hash ("unknown" outside a checkout), followed by " (working tree modified)"
    when mark_modified and a tracked file differs from it."""
    def git(*args):
        try:
            r = subprocess.run(["git", "--no-optional-locks", "-C", repo, *args],
                               stdin=subprocess.DEVNULL, capture_output=True, text=True,
                               timeout=60)
            return r.stdout.strip() if r.returncode == 0 else ""
        except (OSError, subprocess.SubprocessError):
            return ""
    rev = git("rev-parse", "--short", "HEAD")
    if not rev:
        return "unknown"
    if mark_modified and git("status", "--porcelain", "--untracked-files=no"):
        rev += " (working tree modified)"
    return rev


def cpu_model():
    """The first "model name" of /proc/cpuinfo, or ""."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return re.sub(r"^model name\s*:\s*", "", line.rstrip("\n"))
    except OSError:
        pass
    return ""


def detect_env(torchrun, python=None, repo=REPO):
    """What every report's header names: torch_py (the interpreter on torchrun's #! line, or
    python), git_rev (HEAD, marked when the working tree differs) and cpu_model."""
    return SimpleNamespace(torch_py=torch_python(torchrun, python), git_rev=git_rev(repo),
                           cpu_model=cpu_model())


def output_of(cmd, stderr=subprocess.DEVNULL, timeout=120):
    """cmd's stdout without its trailing newlines, or None when it cannot run or fails."""
    try:
        r = subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=stderr,
                           timeout=timeout)
    except (OSError, subprocess.SubprocessError):
        return None
    if r.returncode != 0:
        return None
    return r.stdout.decode(errors="replace").rstrip("\n")


def torch_version(py):
    """torch.__version__ as py imports it, or "unknown"."""
    return output_of([py, "-c", "import torch; print(torch.__version__)"]) or "unknown"


def python_version(py):
    """`py --version` ("Python 3.11.2"), or "unknown"."""
    return output_of([py, "--version"], stderr=subprocess.STDOUT) or "unknown"


def version_line(binary):
    """The first line of `binary --version`, or "unknown"."""
    out = output_of([binary, "--version"])
    return out.split("\n")[0] if out else "unknown"


def sha256_12(path):
    """The first 12 hex digits of path's SHA-256 (the reports name binaries by it)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()[:12]


def nproc():
    """CPUs this process may run on (as nproc(1) counts them)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def machine(cpu=""):
    """The report's machine line: "nproc=N, uname -r=R[, cpu=MODEL]"."""
    return f"nproc={nproc()}, uname -r={os.uname().release}" + (f", cpu={cpu}" if cpu else "")


def utc_now():
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
