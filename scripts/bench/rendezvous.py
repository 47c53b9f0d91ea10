#!/usr/bin/env python3
"""Multi-node rendezvous benchmark: mxrun against torchrun (dynamic c10d rendezvous), all
"nodes" being real agent processes on this one machine, talking over loopback.

Measures, for both launchers:
  1. dead node, killed: 3 agents x 1 worker, --nnodes=2:3. Once all 3 workers run
     (WORLD_SIZE=3), SIGKILL one agent's whole process tree; time from the kill to both
     surviving nodes' workers running again with WORLD_SIZE=2.
  2. dead node, silent: the same with SIGSTOP instead of SIGKILL (the stopped tree is
     SIGKILLed when the run ends).
  3. worker failure: 2 agents x 2 workers, --nnodes=2, --max_restarts=1; SIGKILL one worker
     of the second node (by the pid it wrote); time until all 4 ranks have started again
     (mxrun gives them TORCHELASTIC_RESTART_COUNT=1; torchrun's count is per agent, so its
     node that did not fail restarts with 0: the check is a new start line for every rank).
  4. scale: N agents (N = 8, 16, 32), --nnodes=N:N, 1 worker each that exits 0 at once;
     time from launching the agents to the last worker's start line. Then
     rdzv_loadgen against a fresh mxrun-master for N = 1024 and 4096 sessions: its
     form_s and the master's peak RSS (VmHWM).

Every worker is the same shell script (`--no_python sh worker.sh`): it appends
"<date +%s.%N> $TORCHELASTIC_RESTART_COUNT $WORLD_SIZE $RANK" to its node's log file,
writes its pid to a file, then `exec sleep 600` (or exits 0 at once in the scale case).

Rendezvous layout:
  - mxrun, cases 1-2: a separate `mxrun-master --port=0`, agents get --rdzv_conf=is_host=0
    (so the master does not die with the killed agent).
  - torchrun, cases 1-2, and both launchers in case 3: agent 0 starts first and hosts the
    store/master on the endpoint; the others start once it listens. The killed agent
    (cases 1-2) is the last one, never the host.
  - case 4: all N agents start at once with the same command; whichever binds the endpoint
    hosts it (both launchers).

Prints Markdown tables of medians and torchrun/mxrun ratios on stdout; progress on stderr.

Environment:
  RUNS                  measured runs per case (default 5)
  TORCHRUN_DEAD_RUNS    torchrun runs for cases 1-2 (default RUNS)
  TORCHRUN_DEAD_TIMEOUT seconds to wait for torchrun survivors to re-form (default 120)
  TORCHRUN_DEAD_STOP_EARLY  1 (default): once a torchrun run of case 1 or 2 did not
                        re-form within the bound, skip its remaining runs (they would each
                        just wait out the same bound); 0: run them all
  RUNS_TORCHRUN_SCALE   torchrun runs per N in case 4 (default 2)
  TORCHRUN_SCALE_TIMEOUT  bound for one torchrun scale run in seconds (default 300)
  SCALE_NODES           agent counts for case 4 (default "8 16 32")
  CASES                 which cases, comma-separated (default dead,worker,scale,loadgen: cases
                        1-2, 3, 4 and its load generator)
  SAMPLES_DIR           where case 4's samples go for the documents' plot (default
                        <repo>/docs/data; off: nowhere; scripts/bench/samples.py)
  LOADGEN_NODES         rdzv_loadgen session counts (default "1024 4096")
  MXRUN, MXRUN_MASTER, RDZV_LOADGEN  binaries (default <repo>/build/bin/...)
  TORCHRUN              torchrun (default <repo>/.venv/bin/torchrun: torchrun 2.13 from the
                        project's venv)
rendezvous.sh runs it with $PYTHON (default <repo>/.venv/bin/python3), which drives the
measurements: sub-millisecond clocks, 5 ms polling, bounded waits.

torchrun 2.13 gets the same flags as mxrun (its default --monitor_interval is already 0.1 s).
The binaries run as private copies, so that a rebuild during the benchmark cannot swap them.
Every process the benchmark starts carries a marker in its environment; it is
killed by pid (or by the process group it was started in with setsid), never by name.
"""
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_common import (DEFAULT_MXRUN, DEFAULT_PYTHON, DEFAULT_TORCHRUN, REPO, Log,  # noqa: E402
                          detect_env, die, env, executable, free_port, is_whole, loadavg,
                          machine, make_workdir, pids_marked, print_problems, private_copy,
                          python_version, run_main, sha256_12, signal_group, signal_pids,
                          status_kib, torch_version, utc_now, version_line, wait_until)
from samples import keep  # noqa: E402

SCRIPT = "rendezvous.sh"


def fail(msg):
    die(SCRIPT, msg)


# ------------------------------------------------------------------ settings
SETTINGS = {  # name -> default; the header names every one given in the environment
    "RUNS": "5",
    "TORCHRUN_DEAD_RUNS": None,   # RUNS
    "TORCHRUN_DEAD_TIMEOUT": "120",
    "TORCHRUN_DEAD_STOP_EARLY": "1",
    "RUNS_TORCHRUN_SCALE": "2",
    "TORCHRUN_SCALE_TIMEOUT": "300",
    "SCALE_NODES": "8 16 32",
    "LOADGEN_NODES": "1024 4096",
    "CASES": "dead,worker,scale,loadgen",
}
S = {}
for _name, _default in SETTINGS.items():
    S[_name] = env(_name, _default if _default is not None else S["RUNS"])
MXRUN_GIVEN = env("MXRUN", DEFAULT_MXRUN)
MASTER_GIVEN = env("MXRUN_MASTER", os.path.join(REPO, "build/bin/mxrun-master"))
LOADGEN_GIVEN = env("RDZV_LOADGEN", os.path.join(REPO, "build/bin/rdzv_loadgen"))
TORCHRUN = env("TORCHRUN", DEFAULT_TORCHRUN)

for _name in ("RUNS", "TORCHRUN_DEAD_RUNS", "TORCHRUN_DEAD_TIMEOUT", "RUNS_TORCHRUN_SCALE",
              "TORCHRUN_SCALE_TIMEOUT"):
    if not is_whole(S[_name]):
        fail(f"{_name} must be a whole number")
if int(S["RUNS"]) < 1:
    fail("RUNS must be >= 1")
if S["TORCHRUN_DEAD_STOP_EARLY"] not in ("0", "1"):
    fail("TORCHRUN_DEAD_STOP_EARLY must be 0 or 1")
if not all(is_whole(n) for n in S["SCALE_NODES"].split() + S["LOADGEN_NODES"].split()):
    fail("SCALE_NODES and LOADGEN_NODES must be whole numbers")
for _b in (MXRUN_GIVEN, MASTER_GIVEN, LOADGEN_GIVEN):
    if not executable(_b):
        fail(f"not found or not executable: {_b} (build: cd build && ninja mxrun mxrun-master "
             "rdzv_loadgen)")
if not executable(TORCHRUN):
    fail(f"torchrun not found: {TORCHRUN}")

RUNS = int(S["RUNS"])
T_DEAD_RUNS = int(S["TORCHRUN_DEAD_RUNS"])
T_DEAD_TIMEOUT = float(S["TORCHRUN_DEAD_TIMEOUT"])
T_DEAD_STOP_EARLY = S["TORCHRUN_DEAD_STOP_EARLY"] == "1"
T_SCALE_RUNS = int(S["RUNS_TORCHRUN_SCALE"])
T_SCALE_TIMEOUT = float(S["TORCHRUN_SCALE_TIMEOUT"])
SCALE_NODES = [int(x) for x in S["SCALE_NODES"].split()]
LOADGEN_NODES = [int(x) for x in S["LOADGEN_NODES"].split()]
ALL_CASES = ("dead", "worker", "scale", "loadgen")
CASES = set(S["CASES"].split(","))
if not CASES or CASES - set(ALL_CASES):
    fail(f"CASES={S['CASES']}: accepted: a comma list of {', '.join(ALL_CASES)}")

WORK = make_workdir("mxrun-rdzv-bench.")
MXRUN = os.path.join(WORK, "bin", "mxrun")            # private copies (prepare)
MASTER = os.path.join(WORK, "bin", "mxrun-master")
LOADGEN = os.path.join(WORK, "bin", "rdzv_loadgen")
WORKER = os.path.join(WORK, "worker.sh")
MARK = "MXBENCH_ID=" + WORK          # every process we start carries this
MX_TIMEOUT = 60.0                    # mxrun: bound of any single wait
START_TIMEOUT = 120.0                # any launcher: first round formed
STOP_GRACE = 15.0                    # SIGTERM -> exit, at the end of a run

log = Log(SCRIPT)
problems = log.problems   # anomalies: printed at the end
problem, progress = log.warn, log.progress
notes = []      # observations (what torchrun's survivors did, ...)
started = []    # every Popen, to reap

# The worker every node runs.
WORKER_SH = """echo "$(date +%s.%N) $TORCHELASTIC_RESTART_COUNT $WORLD_SIZE $RANK" >> "$BENCH_LOG"
[ -n "${BENCH_EXIT:-}" ] && exit 0
echo $$ > "$BENCH_LOG.pid.$TORCHELASTIC_RESTART_COUNT.$LOCAL_RANK"
exec sleep 600
"""


def prepare():
    """Private copies of the binaries, so that a rebuild during the benchmark cannot swap them
    (mxrun hands multi-node jobs to the mxrun-multinode binary next to it, when the build has
    one), and the worker script."""
    os.mkdir(os.path.join(WORK, "bin"))
    private_copy(MXRUN_GIVEN, MXRUN)
    private_copy(MASTER_GIVEN, MASTER)
    private_copy(LOADGEN_GIVEN, LOADGEN)
    multinode = os.path.join(os.path.dirname(MXRUN_GIVEN), "mxrun-multinode")
    if executable(multinode):
        private_copy(multinode, os.path.join(WORK, "bin", "mxrun-multinode"))
    with open(WORKER, "w") as f:
        f.write(WORKER_SH)


def print_header():
    """How this was run, and on what."""
    invocation = ""
    for name in SETTINGS:
        if name in os.environ:   # every setting given in the environment
            invocation += f'{name}="{S[name]}" '
    if TORCHRUN != DEFAULT_TORCHRUN:
        invocation += f"TORCHRUN={TORCHRUN} "
    if sys.executable != DEFAULT_PYTHON:
        invocation += f"PYTHON={sys.executable} "
    invocation += "scripts/bench/rendezvous.sh" + "".join(" " + a for a in sys.argv[1:])
    e = detect_env(TORCHRUN)
    shas = f"sha256 {sha256_12(MXRUN)}..."
    multinode = os.path.join(WORK, "bin", "mxrun-multinode")
    if executable(multinode):
        shas += f"; mxrun-multinode sha256 {sha256_12(multinode)}..."
    print("### mxrun vs torchrun: multi-node rendezvous")
    print()
    print(f"- command: `{invocation}`")
    print(f"- date: {utc_now()}")
    print(f"- machine: {machine(e.cpu_model)}; every node is a process on this machine, over "
          "loopback")
    print(f"- mxrun: `{MXRUN_GIVEN}` ({version_line(MXRUN)}, repo at {e.git_rev}, {shas}; "
          f"mxrun-master sha256 {sha256_12(MASTER)}...)")
    print(f"- torchrun: `{TORCHRUN}` (torch {torch_version(e.torch_py)}, "
          f"{python_version(e.torch_py)}), with the same flags as mxrun")
    print(f"- load average at start: {loadavg()}")
    print(flush=True)


# ------------------------------------------------------------------ processes
def listening(port):
    want = ":%04X" % port
    for fn in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(fn) as f:
                next(f)
                for line in f:
                    parts = line.split()
                    if parts[1].endswith(want) and parts[3] == "0A":
                        return True
        except OSError:
            pass
    return False


def exited(p):
    return p.poll() is not None


class Node:
    """One agent, started in its own session/process group (setsid)."""

    def __init__(self, rundir, name, cmd, extra_env=None):
        self.name = name
        self.log = os.path.join(rundir, name + ".log")
        self.out_path = os.path.join(rundir, name + ".out")
        self.tag = "MXBENCH_NODE=" + os.path.join(rundir, name)
        env = dict(os.environ)
        for k in list(env):
            if k.startswith("BENCH_") or k.startswith("PET_") or k.startswith("TORCHELASTIC_"):
                del env[k]
        env.update(extra_env or {})
        env["BENCH_LOG"] = self.log
        k, v = MARK.split("=", 1)
        env[k] = v
        k, v = self.tag.split("=", 1)
        env[k] = v
        self.out = open(self.out_path, "wb")
        self.p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=self.out,
                                  stderr=subprocess.STDOUT, cwd=rundir, env=env,
                                  start_new_session=True)
        started.append(self.p)
        self.pgid = self.p.pid

    def lines(self):
        """Complete worker start lines: (timestamp, restart_count, world_size, rank)."""
        try:
            with open(self.log) as f:
                data = f.read()
        except FileNotFoundError:
            return []
        out = []
        for line in data.split("\n")[:-1]:
            parts = line.split()
            try:
                out.append((float(parts[0]), int(parts[1]), int(parts[2]), int(parts[3])))
            except (ValueError, IndexError):
                pass
        return out

    def worker_pid(self, restart, local_rank):
        try:
            with open(f"{self.log}.pid.{restart}.{local_rank}") as f:
                return int(f.read().strip())
        except (OSError, ValueError):
            return None

    def tree(self):
        return pids_marked(self.tag)

    def signal_tree(self, sig, pids=None):
        signal_group(self.pgid, sig)
        signal_pids(pids if pids is not None else self.tree(), sig)

    def output(self):
        try:
            with open(self.out_path, "rb") as f:
                return f.read().decode(errors="replace")
        except OSError:
            return ""


def stop_nodes(nodes, label):
    """End a run: SIGTERM every live agent, bounded wait, then SIGKILL whatever is left."""
    for n in nodes:
        if not exited(n.p):
            signal_pids([n.p.pid], signal.SIGTERM)
    wait_until(lambda: all(exited(n.p) for n in nodes), STOP_GRACE)
    for n in nodes:
        if not exited(n.p):
            problem(f"{label}: {n.name} still running {STOP_GRACE:.0f}s after SIGTERM, killed")
            n.signal_tree(signal.SIGKILL)
    for n in nodes:
        try:
            n.p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            problem(f"{label}: {n.name} (pid {n.p.pid}) did not exit after SIGKILL")
        n.out.close()
    # Anything still carrying the node markers (workers left behind) is a leak.
    for n in nodes:
        left = wait_until(lambda: not n.tree(), 2.0)
        if left is None:
            pids = n.tree()
            problem(f"{label}: {n.name} left {len(pids)} process(es) behind after it exited, killed")
            signal_pids(pids, signal.SIGKILL)


class Master:
    def __init__(self, rundir):
        self.out_path = os.path.join(rundir, "master.out")
        self.out = open(self.out_path, "wb")
        env = dict(os.environ)
        k, v = MARK.split("=", 1)
        env[k] = v
        self.p = subprocess.Popen([MASTER, "--port=0"], stdin=subprocess.DEVNULL, stdout=self.out,
                                  stderr=subprocess.STDOUT, cwd=rundir, env=env,
                                  start_new_session=True)
        started.append(self.p)

        def port():
            with open(self.out_path) as f:
                m = re.search(r"listening on 127\.0\.0\.1:(\d+)", f.read())
            return int(m.group(1)) if m else None

        self.port = wait_until(lambda: port() or (exited(self.p) and -1), 30.0)
        if not self.port or self.port < 0:
            self.stop()
            raise RuntimeError("mxrun-master did not report its port: " + self.output())

    def vm_hwm_kib(self):
        return status_kib(self.p.pid, "VmHWM")

    def output(self):
        with open(self.out_path, errors="replace") as f:
            return f.read()

    def stop(self):
        if not exited(self.p):
            signal_pids([self.p.pid], signal.SIGTERM)
            if not wait_until(lambda: exited(self.p), 5.0):
                problem("mxrun-master still running 5s after SIGTERM, killed")
                signal_pids([self.p.pid], signal.SIGKILL)
        self.p.wait(timeout=10)
        self.out.close()


def rundir_for(label):
    d = os.path.join(WORK, label)
    os.makedirs(d)
    return d


def agent_cmd(launcher, port, run_id, nnodes, nproc, extra):
    if launcher == "mxrun":
        base = [MXRUN]
    else:
        base = [TORCHRUN]
    return base + ["--rdzv_backend=c10d", f"--rdzv_endpoint=127.0.0.1:{port}",
                   f"--rdzv_id={run_id}", f"--nnodes={nnodes}", f"--nproc_per_node={nproc}"] \
        + extra + ["--no_python", "sh", WORKER]


EXPECTED = [
    re.compile(r"mxrun: warning: received SIGTERM"),                       # the end of every run
    re.compile(r"mxrun: warning: cancelled by SIGTERM: ranks? [0-9,-]+ ended by SIGTERM; "
               r"exit code 143"),                                           # and its summary
    re.compile(r"mxrun: warning: restarting the worker group \(1 of 1 restarts\)"),   # case 3
    re.compile(r"mxrun: warning: worker rank \d+ \(local_rank 0, pid \d+\) failed: Signal 9 \(SIGKILL\); "
               r"stopping the group"),                                     # case 3
]
odd_output = {}   # normalised line -> [count, first example, first run label]


def suspicious_lines(text):
    """Output lines that are errors or warnings we did not provoke."""
    out = []
    for line in text.splitlines():
        low = line.lower()
        if not ("error" in low or "fatal" in low or "abort" in low or "exception" in low or
                "warning" in low or re.match(r"^[EFW]\d{4} ", line)):
            continue
        if any(e.search(line) for e in EXPECTED):
            continue
        out.append(line.strip())
    return out


def record_output(label, name, text):
    for line in suspicious_lines(text):
        # Same message, other numbers (or gRPC's status fields in another order): one entry.
        key = " ".join(re.sub(r"\d+", "#", line.split("{", 1)[0]).split())[:110]
        if key not in odd_output:
            odd_output[key] = [0, line if len(line) <= 400 else line[:400] + " ...", f"{label}, {name}"]
            progress(f"warning: {label}: {name} printed: {line[:300]}")
        odd_output[key][0] += 1


def check_mx_output(label, nodes, master=None):
    for n in nodes:
        record_output(label, n.name, n.output())
    if master is not None:
        record_output(label, "mxrun-master", master.output())


# ------------------------------------------------------------------ 1-2. dead node
def dead_node(launcher, sig, idx, timeout):
    """3 agents x 1 worker, --nnodes=2:3; signal the last agent's tree once WORLD_SIZE=3 runs.
    Returns seconds from the signal to both survivors' WORLD_SIZE=2 workers having started, or
    None past timeout."""
    sname = "kill" if sig == signal.SIGKILL else "stop"
    label = f"dead-{sname} {launcher} #{idx}"
    rundir = rundir_for(f"dead_{sname}_{launcher}_{idx}")
    master = None
    nodes = []
    result = None
    try:
        if launcher == "mxrun":
            master = Master(rundir)
            port = master.port
            for i in range(3):
                nodes.append(Node(rundir, f"node{i}",
                                  agent_cmd("mxrun", port, f"dead{sname}{idx}", "2:3", 1,
                                            ["--rdzv_conf=is_host=0"])))
        else:
            port = free_port()
            cmd = agent_cmd("torchrun", port, f"dead{sname}{idx}", "2:3", 1, [])
            nodes.append(Node(rundir, "node0", cmd))
            if not wait_until(lambda: listening(port) or exited(nodes[0].p), START_TIMEOUT) \
                    or exited(nodes[0].p):
                problem(f"{label}: the store-hosting agent never listened on {port}")
                return None
            for i in (1, 2):
                nodes.append(Node(rundir, f"node{i}", cmd))
        victim, survivors = nodes[2], nodes[:2]

        def formed():
            return all(any(l[2] == 3 for l in n.lines()) for n in nodes) and \
                all(n.worker_pid(0, 0) for n in nodes)
        if not wait_until(formed, START_TIMEOUT, lambda: any(exited(n.p) for n in nodes)):
            problem(f"{label}: the 3-node round did not form within {START_TIMEOUT:.0f}s; agents: "
                    f"{[n.p.returncode for n in nodes]} (None: running)")
            return None
        ranks = sorted(l[3] for n in nodes for l in n.lines())
        if ranks != [0, 1, 2]:
            problem(f"{label}: 3-node round started ranks {ranks}, expected [0, 1, 2]")
        before = [len(n.lines()) for n in survivors]
        out_before = [len(n.output()) for n in survivors]
        tree = victim.tree()
        t0 = time.time()
        victim.signal_tree(sig, tree)

        def reformed():
            new = [[l for l in n.lines()[b:] if l[2] == 2] for n, b in zip(survivors, before)]
            return new if all(new) else None
        new = wait_until(reformed, timeout, lambda: all(exited(n.p) for n in survivors))
        if new is None:
            # What did the survivors do meanwhile?
            alive = sum(not exited(n.p) for n in survivors)
            starts = sum(len(n.lines()) - b for n, b in zip(survivors, before))
            old_workers = sum(1 for n in survivors if n.worker_pid(0, 0) and
                              os.path.exists(f"/proc/{n.worker_pid(0, 0)}"))
            said = []
            for n, ob in zip(survivors, out_before):
                said += [l.strip() for l in n.output()[ob:].splitlines() if l.strip()]
            msg = (f"{label}: no re-formed round within {timeout:.0f}s; survivors: {alive}/2 agents "
                   f"(exit codes {[n.p.returncode for n in survivors]}) "
                   f"still running, {starts} new worker start(s) after the {sname}, "
                   f"{old_workers}/2 original WORLD_SIZE=3 workers still running; "
                   f"agent output after the {sname}: " +
                   ("; ".join(said[:4]) + (" ..." if len(said) > 4 else "") if said else "none"))
            if launcher == "torchrun":
                notes.append(msg)
                progress(msg)
            else:
                problem(msg)
            return None
        result = max(l[0] for ls in new for l in ls) - t0
        # Settle a moment, then check that the survivors did exactly one 2-node round.
        time.sleep(1.0)
        after = [l for n, b in zip(survivors, before) for l in n.lines()[b:]]
        if sorted(l[3] for l in after) != [0, 1] or any(l[2] != 2 for l in after):
            problem(f"{label}: after the {sname} the survivors started "
                    f"{[(l[1], l[2], l[3]) for l in after]} (restart, world, rank); expected one 2-node round")
        return result
    finally:
        for n in nodes[2:]:
            n.signal_tree(signal.SIGKILL)   # the victim (stopped or killed) and its workers
        stop_nodes(nodes, label)
        if launcher == "mxrun":
            check_mx_output(label, nodes, master)
        if master is not None:
            master.stop()
        progress(f"{label}: " + (f"{result:.3f}s" if result is not None else "-"))


# ------------------------------------------------------------------ 3. worker failure
def worker_failure(launcher, idx, timeout):
    """2 agents x 2 workers, --nnodes=2, --max_restarts=1; agent 0 hosts the endpoint.
    SIGKILL local rank 0 of node 1; seconds until every one of the 4 ranks has started again.
    (torchrun's TORCHELASTIC_RESTART_COUNT is per agent: the node that did not fail restarts its
    workers with count 0, so the count cannot be the criterion for both.)"""
    label = f"worker-failure {launcher} #{idx}"
    rundir = rundir_for(f"worker_{launcher}_{idx}")
    nodes = []
    result = None
    try:
        port = free_port()
        cmd = agent_cmd(launcher, port, f"wf{idx}", "2", 2, ["--max_restarts=1"])
        nodes.append(Node(rundir, "node0", cmd))
        if not wait_until(lambda: listening(port) or exited(nodes[0].p), START_TIMEOUT) \
                or exited(nodes[0].p):
            problem(f"{label}: the hosting agent never listened on {port}")
            return None
        nodes.append(Node(rundir, "node1", cmd))

        def formed():
            return sum(len(n.lines()) for n in nodes) >= 4 and \
                all(n.worker_pid(0, r) for n in nodes for r in (0, 1))
        if not wait_until(formed, START_TIMEOUT, lambda: any(exited(n.p) for n in nodes)):
            problem(f"{label}: the 2-node round did not form within {START_TIMEOUT:.0f}s; agents: "
                    f"{[n.p.returncode for n in nodes]} (None: running)")
            return None
        first = sorted((l[1], l[2], l[3]) for n in nodes for l in n.lines())
        if first != [(0, 4, r) for r in range(4)]:
            problem(f"{label}: first round started {first} (restart, world, rank)")
        pid = nodes[1].worker_pid(0, 0)
        before = [len(n.lines()) for n in nodes]
        t0 = time.time()
        signal_pids([pid], signal.SIGKILL)

        def new_starts():
            return [l for n, b in zip(nodes, before) for l in n.lines()[b:]]

        def restarted():
            new = new_starts()
            return new if len({l[3] for l in new}) >= 4 else None
        new = wait_until(restarted, timeout, lambda: all(exited(n.p) for n in nodes))
        if new is None:
            got = [(l[1], l[2], l[3]) for l in new_starts()]
            states = [("exited %s" % n.p.returncode) if exited(n.p) else "running" for n in nodes]
            problem(f"{label}: not all 4 ranks restarted within {timeout:.0f}s; starts after the kill "
                    f"{got} (restart, world, rank); agents {states}")
            return None
        result = max(min(l[0] for l in new if l[3] == r) for r in range(4)) - t0
        time.sleep(0.5)
        again = [(l[1], l[2], l[3]) for l in new_starts()]
        if sorted(x[2] for x in again) != [0, 1, 2, 3] or any(x[1] != 4 for x in again):
            problem(f"{label}: after the worker kill the agents started {sorted(again, key=lambda x: x[2])} "
                    "(restart, world, rank); expected ranks 0-3 of 4, once each")
        counts = {n.name: sorted({l[1] for l in n.lines()[b:]}) for n, b in zip(nodes, before)}
        if launcher == "mxrun" and any(c != [1] for c in counts.values()):
            problem(f"{label}: TORCHELASTIC_RESTART_COUNT of the restarted workers per node: {counts}; expected 1")
        if launcher == "torchrun" and not any("RESTART_COUNT" in x for x in notes):
            notes.append("case 3: torchrun's TORCHELASTIC_RESTART_COUNT is per agent: after the kill the "
                         f"restarted workers had, per node, {counts} (node1 lost the worker; node0 restarted for "
                         "the membership change without spending a restart); mxrun gives every node 1")
        return result
    finally:
        stop_nodes(nodes, label)
        if launcher == "mxrun":
            check_mx_output(label, nodes)
        progress(f"{label}: " + (f"{result:.3f}s" if result is not None else "-"))


# ------------------------------------------------------------------ 4. scale
def scale(launcher, n, idx, timeout):
    """n agents, --nnodes=n:n, 1 worker each that exits 0 at once; all started together.
    Seconds from launching the first agent to the last worker's start line."""
    label = f"scale N={n} {launcher} #{idx}"
    rundir = rundir_for(f"scale_{launcher}_{n}_{idx}")
    nodes = []
    result = None
    try:
        port = free_port()
        cmd = agent_cmd(launcher, port, f"scale{n}x{idx}", f"{n}:{n}", 1, [])
        t0 = time.time()
        for i in range(n):
            nodes.append(Node(rundir, f"node{i}", cmd, {"BENCH_EXIT": "1"}))

        def done():
            ls = [l for nd in nodes for l in nd.lines()]
            return ls if len(ls) >= n else None
        ls = wait_until(done, timeout, lambda: all(exited(nd.p) for nd in nodes))
        if ls is None:
            got = sum(len(nd.lines()) for nd in nodes)
            dead = [(nd.name, nd.p.returncode) for nd in nodes if exited(nd.p)]
            problem(f"{label}: {got}/{n} workers started within {timeout:.0f}s; agents exited: {dead[:6]}")
            return None
        result = max(l[0] for l in ls) - t0
        ranks = sorted(l[3] for l in ls)
        if ranks != list(range(n)) or any(l[2] != n for l in ls):
            problem(f"{label}: workers started with ranks {ranks[:8]}... world sizes {sorted(set(l[2] for l in ls))}")
        if not wait_until(lambda: all(exited(nd.p) for nd in nodes), timeout):
            problem(f"{label}: not every agent exited within {timeout:.0f}s of its worker's exit")
        bad = [(nd.name, nd.p.returncode) for nd in nodes if exited(nd.p) and nd.p.returncode != 0]
        if bad:
            problem(f"{label}: agents exited non-zero: {bad[:6]}")
        return result
    finally:
        stop_nodes(nodes, label)
        if launcher == "mxrun":
            check_mx_output(label, nodes)
        progress(f"{label}: " + (f"{result:.3f}s" if result is not None else "-"))


def loadgen(n, idx):
    """Fresh mxrun-master; rdzv_loadgen with n sessions. Returns (form_s, finish_s, VmHWM KiB)."""
    label = f"loadgen N={n} #{idx}"
    rundir = rundir_for(f"loadgen_{n}_{idx}")
    master = Master(rundir)
    res = None
    try:
        base_kib = master.vm_hwm_kib()
        env = dict(os.environ)
        k, v = MARK.split("=", 1)
        env[k] = v
        p = subprocess.Popen([LOADGEN, f"--endpoint=127.0.0.1:{master.port}", f"--nodes={n}",
                              f"--run_id=load{n}x{idx}", "--timeout=60"],
                             stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, cwd=rundir, env=env, start_new_session=True)
        started.append(p)
        try:
            out, err = p.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            signal_pids([p.pid], signal.SIGKILL)
            p.communicate()
            problem(f"{label}: rdzv_loadgen ran past 120s, killed")
            return None
        out, err = out.decode(errors="replace"), err.decode(errors="replace")
        m = re.search(r"form_s=([0-9.]+) finish_s=([0-9.]+)", out)
        if p.returncode != 0 or not m:
            problem(f"{label}: rdzv_loadgen exit {p.returncode}: {(out + err).strip()[:300]}")
            return None
        if err.strip():
            problem(f"{label}: rdzv_loadgen stderr: {err.strip()[:300]}")
        ok = re.search(r"rounds_ok=(\d+)", out)
        if ok and int(ok.group(1)) != n:
            problem(f"{label}: {out.strip()}")
        res = (float(m.group(1)), float(m.group(2)), master.vm_hwm_kib(), base_kib)
        return res
    finally:
        master.stop()
        record_output(label, "mxrun-master", master.output())
        progress(f"{label}: " + (f"form_s={res[0]:.3f} VmHWM={res[2]} KiB" if res else "-"))


# ------------------------------------------------------------------ report
def med(xs):
    return statistics.median(xs) if xs else None


def fmt_s(x):
    if x is None:
        return "-"
    return f"{x * 1000:.0f} ms" if x < 1 else f"{x:.2f} s"


def runs_cell(xs):
    return " ".join(("%.3f" % x) if x is not None else "timeout" for x in xs) or "-"


def summary(xs, bound):
    """Median over the runs, a run that hit the bound counting as infinitely long.
    Returns (cell text, median or None when the median is past the bound)."""
    if not xs:
        return "-", None
    vals = sorted(float("inf") if x is None else x for x in xs)
    m = statistics.median(vals)
    missed = sum(x is None for x in xs)
    if m == float("inf"):
        if missed == len(xs):
            return f"> {bound:.0f} s (did not re-form)", None
        return f"> {bound:.0f} s ({missed} of {len(xs)} runs past the bound)", None
    return fmt_s(m) + (f" ({missed} of {len(xs)} runs past the bound)" if missed else ""), m


def ratio(t, m, t_lower_bound=None):
    if m is None or m <= 0:
        return "-"
    if t is None:
        return f"> {t_lower_bound / m:.0f}x" if t_lower_bound else "-"
    return f"{t / m:.1f}x"


def main():
    prepare()
    print_header()
    progress(f"work dir {WORK}")
    # Warm the page cache for both launchers (not measured).
    for cmd in ([MXRUN, "--version"], [TORCHRUN, "--help"]):
        subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=120)

    res = {}
    # 1-2. dead node
    for sig, key in ((signal.SIGKILL, "kill"), (signal.SIGSTOP, "stop")) if "dead" in CASES else ():
        mx, tr = [], []
        for i in range(max(RUNS, T_DEAD_RUNS)):
            if i < RUNS:
                mx.append(dead_node("mxrun", sig, i, MX_TIMEOUT))
            skip = T_DEAD_STOP_EARLY and tr and all(x is None for x in tr)
            if i < T_DEAD_RUNS and not skip:
                tr.append(dead_node("torchrun", sig, i, T_DEAD_TIMEOUT))
        res[key] = (mx, tr)
    # 3. worker failure
    mx, tr = [], []
    for i in range(RUNS if "worker" in CASES else 0):
        mx.append(worker_failure("mxrun", i, MX_TIMEOUT))
        tr.append(worker_failure("torchrun", i, START_TIMEOUT))
    res["worker"] = (mx, tr)
    # 4. scale
    for n in SCALE_NODES if "scale" in CASES else ():
        mx, tr = [], []
        for i in range(max(RUNS, T_SCALE_RUNS)):
            if i < RUNS:
                mx.append(scale("mxrun", n, i, MX_TIMEOUT))
            if i < T_SCALE_RUNS:
                tr.append(scale("torchrun", n, i, T_SCALE_TIMEOUT))
        res[("scale", n)] = (mx, tr)
    lg = {}
    for n in LOADGEN_NODES if "loadgen" in CASES else ():
        lg[n] = [loadgen(n, i) for i in range(RUNS)]
    if "scale" in CASES:
        keep("rendezvous-scale",
             [{"case": f"{n} nodes", "x": n,
               "samples": {"mxrun": res[("scale", n)][0], "torchrun": res[("scale", n)][1]}}
              for n in SCALE_NODES],
             f"RUNS={RUNS} RUNS_TORCHRUN_SCALE={T_SCALE_RUNS} CASES=scale "
             f"SCALE_NODES='{' '.join(map(str, SCALE_NODES))}' scripts/bench/rendezvous.sh", "s",
             "N agents of 1 worker each on one machine, --nnodes=N:N: launch to the last worker "
             "started")

    # ---- tables
    if CASES & {"dead", "worker"}:
        print_failure_tables(res)
    if "scale" in CASES:
        print_scale_table(res)
    if "loadgen" in CASES:
        print_loadgen_table(lg)
    print_commands()


def print_failure_tables(res):
    print("#### Node failure and worker failure")
    print()
    print("Time from the signal to every surviving worker running again (medians; per-run values "
          "in seconds below the table).")
    print()
    print("| case | mxrun | torchrun | torchrun/mxrun | target | met |")
    print("|---|---:|---:|---:|---|:---:|")
    spread = []
    rows = (
        ("kill", "1. dead node, killed: 3 agents x 1 worker, `--nnodes=2:3`, SIGKILL one agent's tree "
                 "-> both survivors' workers at WORLD_SIZE=2", T_DEAD_TIMEOUT, "mxrun < 1 s"),
        ("stop", "2. dead node, silent: same, SIGSTOP one agent's tree "
                 "-> both survivors' workers at WORLD_SIZE=2", T_DEAD_TIMEOUT, "mxrun < 6 s"),
        ("worker", "3. worker failure: 2 agents x 2 workers, `--max_restarts=1`, SIGKILL one worker "
                   "of node 1 -> all 4 ranks started again", START_TIMEOUT, "torchrun/mxrun >= 5x"),
    )
    for key, label, bound, target in rows:
        if key not in res or not res[key][0]:
            continue
        mx, tr = res[key]
        ms, mm = summary(mx, MX_TIMEOUT)
        ts, tm = summary(tr, bound)
        tr_bound = bound if tr and tm is None else None
        r = ratio(tm, mm, tr_bound)
        if key == "kill":
            met = mm is not None and mm < 1.0
        elif key == "stop":
            met = mm is not None and mm < 6.0
        else:
            met = mm is not None and ((tm is not None and tm / mm >= 5) or (tm is None and tr_bound and tr_bound / mm >= 5))
        print(f"| {label} | {ms} | {ts} | {r} | {target} | {'yes' if met else 'no'} |")
        spread.append((label.split(":")[0], mx, tr))
    print()
    print("| case | mxrun runs (s) | torchrun runs (s) |")
    print("|---|---|---|")
    for label, mx, tr in spread:
        print(f"| {label} | {runs_cell(mx)} | {runs_cell(tr)} |")
    print()
    print(f"\"timeout\": nothing within the bound ({MX_TIMEOUT:.0f} s for mxrun; {T_DEAD_TIMEOUT:.0f} s for "
          f"torchrun in cases 1-2, {START_TIMEOUT:.0f} s in case 3).")
    if T_DEAD_STOP_EARLY and any(len(res[k][1]) < T_DEAD_RUNS for k in ("kill", "stop")):
        print(f"torchrun runs of cases 1-2 stop after the first run that does not re-form within the bound "
              f"(the next ones would only wait out the same {T_DEAD_TIMEOUT:.0f} s).")
    print()


def print_scale_table(res):
    print("#### Round formation with N agent processes")
    print()
    print("`--nnodes=N:N`, 1 worker per agent that exits 0 at once, all agents launched together with the "
          "same command (the first to bind the endpoint hosts it); time from launching the first agent to "
          "the last worker's start line.")
    print()
    print("| N | mxrun | torchrun | torchrun/mxrun | mxrun runs (s) | torchrun runs (s) |")
    print("|---:|---:|---:|---:|---|---|")
    for n in SCALE_NODES:
        mx, tr = res[("scale", n)]
        ms, mm = summary(mx, MX_TIMEOUT)
        ts, tm = summary(tr, T_SCALE_TIMEOUT)
        r = ratio(tm, mm, T_SCALE_TIMEOUT if tr and tm is None else None)
        print(f"| {n} | {ms} | {ts} | {r} | {runs_cell(mx)} | {runs_cell(tr)} |")
    print()
    print(f"mxrun: {RUNS} runs per N; torchrun: {T_SCALE_RUNS} per N, each bounded at {T_SCALE_TIMEOUT:.0f} s.")
    print()


def print_loadgen_table(lg):
    print("#### Load generator against one mxrun-master")
    print()
    print("`mxrun-master --port=0` (fresh per run), then `rdzv_loadgen --endpoint=127.0.0.1:PORT --nodes=N "
          "--run_id=loadN`: N sessions from one process; form_s = first Join sent to last round assignment "
          "received. Master peak RSS = VmHWM from /proc after the run.")
    print()
    print("| N | form_s (median) | finish_s (median) | master VmHWM (median) | master VmHWM at start | form_s runs | target | met |")
    print("|---:|---:|---:|---:|---:|---|---|:---:|")
    for n in LOADGEN_NODES:
        rs = lg[n]
        ok = [r for r in rs if r]
        fm = med([r[0] for r in ok])
        fi = med([r[1] for r in ok])
        hw = med([r[2] for r in ok if r[2]])
        b0 = med([r[3] for r in ok if r[3]])
        cells = " ".join(("%.3f" % r[0]) if r else "failed" for r in rs)
        target = "< 3 s" if n == 4096 else ""
        met = ("yes" if fm is not None and fm < 3 and len(ok) == len(rs) else "no") if n == 4096 else ""
        print(f"| {n} | {fmt_s(fm)} | {fmt_s(fi)} | {(hw / 1024):.1f} MiB | {(b0 / 1024):.1f} MiB | {cells} | {target} | {met} |"
              if hw and b0 else f"| {n} | {fmt_s(fm)} | {fmt_s(fi)} | - | - | {cells} | {target} | {met} |")
    print()


def print_commands():
    print("Commands (the same flags for both launchers; every agent is started "
          "under setsid; the worker is `sh worker.sh`, see the script):")
    print()
    print("- cases 1-2, mxrun: `mxrun-master --port=0`; 3 x `mxrun --rdzv_backend=c10d "
          "--rdzv_endpoint=127.0.0.1:PORT --rdzv_id=ID --nnodes=2:3 --nproc_per_node=1 "
          "--rdzv_conf=is_host=0 --no_python sh worker.sh`; the third is signalled")
    print("- cases 1-2, torchrun: `torchrun --rdzv_backend=c10d --rdzv_endpoint=127.0.0.1:PORT "
          "--rdzv_id=ID --nnodes=2:3 --nproc_per_node=1 --no_python sh worker.sh`, the first agent "
          "(store host) started alone, the other two once it listens; the third is signalled")
    print("- case 3, both: `LAUNCHER --rdzv_backend=c10d --rdzv_endpoint=127.0.0.1:PORT --rdzv_id=ID "
          "--nnodes=2 --nproc_per_node=2 --max_restarts=1 --no_python sh worker.sh`, node 0 (hosting the "
          "endpoint) first, node 1 once it listens")
    print("- case 4, both: N x `LAUNCHER --rdzv_backend=c10d --rdzv_endpoint=127.0.0.1:PORT --rdzv_id=ID "
          "--nnodes=N:N --nproc_per_node=1 --no_python sh worker.sh` (worker exits 0 after its start line)")
    print()
    print("Load average at end: " + loadavg())
    if notes:
        print()
        print("What torchrun did instead:")
        print()
        for msg in notes:
            print(f"- {msg}")
    if odd_output:
        print()
        print("Unexpected lines in mxrun's / mxrun-master's output (count over all runs, first example):")
        print()
        for key, (count, example, where) in odd_output.items():
            print(f"- {count}x, first in {where}: `{example}`")
    print_problems(problems)
    if not problems:
        print()
        print("Problems seen: none (every wait ended in time, no wrong world sizes, ranks or restart "
              "counts, no agent exit codes other than expected, nothing left running).")


def cleanup():
    # Backstop: nothing we started outlives the driver (a worker whose agent died first is no
    # agent's child any more: it is found by the marker in its environment).
    signal_pids(pids_marked(MARK), signal.SIGKILL)
    for p in started:
        try:
            p.wait(timeout=5)
        except Exception:
            pass
    shutil.rmtree(WORK, ignore_errors=True)


if __name__ == "__main__":
    run_main(main, cleanup)
