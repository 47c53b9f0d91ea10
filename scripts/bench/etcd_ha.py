#!/usr/bin/env python3
"""No single point of failure, measured: mxrun --rdzv_backend=etcd against torchrun 2.13's etcd-v2
backend (torchrun and python-etcd from the project's venv; Debian's etcd 3.4 serves the v2 API
only when started with --enable-v2, which it is here) and torchrun's c10d, in one run,
every "node" an agent process on this machine, over loopback, one etcd cluster of 3 members (the
default 100 ms heartbeat and 1 s election timeout, as people run it).

Cases (each RUNS times, medians):
  host:    3 agents x 1 worker, --nnodes=2:3. Once all 3 workers run at WORLD_SIZE=3, SIGKILL the
           node hosting the master (mxrun: the agent that won the election; torchrun c10d: the
           agent hosting the store; torchrun etcd-v2: node rank 0, whose host serves the workers'
           MASTER_ADDR) with its workers; time until both survivors' workers run at WORLD_SIZE=2.
  other:   the same, killing a node that hosts nothing.
  standby: mxrun only: 2 mxrun-master replicas and 2 agents (master_service); SIGKILL the serving
           replica; time until the standby serves, and the worker starts counted (2 = no restart).
  scale:   N agents x 1 worker that exits at once, --nnodes=N; time from launch to the last
           worker's start: mxrun etcd, mxrun c10d (in-process master), torchrun etcd-v2, c10d.
  phases:  (not in the default CASES) the scale case for mxrun etcd only, split: launch to the
           elected master serving, to the first worker's start, to the last one's.

Usage: etcd_ha.py  (environment: RUNS, SCALE_NODES, TIMEOUT, CASES (default "host other standby
scale"), KINDS (default all four launchers), MXRUN, MXRUN_MASTER, TORCHRUN (default
<repo>/.venv/bin/torchrun: torchrun 2.13 from the project's venv)); etcd_ha.sh runs it with
$PYTHON (default <repo>/.venv/bin/python3).
Prints Markdown on stdout, progress on stderr. Everything it starts is killed by process group
or pid, never by name.
"""
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_common import descendants, kill_marked, torch_python  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RUNS = int(os.environ.get("RUNS", "5"))
SCALE_NODES = [int(x) for x in os.environ.get("SCALE_NODES", "8 16 32").split()]
TIMEOUT = float(os.environ.get("TIMEOUT", "60"))
MXRUN = os.environ.get("MXRUN", os.path.join(REPO, "build/bin/mxrun"))
MXRUN_MASTER = os.environ.get("MXRUN_MASTER", os.path.join(REPO, "build/bin/mxrun-master"))
DEFAULT_TORCHRUN = os.path.join(REPO, ".venv/bin/torchrun")
DEFAULT_PYTHON = os.path.join(REPO, ".venv/bin/python3")   # etcd_ha.sh's default
TORCHRUN = os.environ.get("TORCHRUN", DEFAULT_TORCHRUN)
# torchrun 2.13 gets the same flags as mxrun: its default --monitor_interval is already 0.1 s,
# so it notices a failure as fast as it can.
CASES = os.environ.get("CASES", "host other standby scale").split()
KINDS = [k for k in ("mxrun etcd", "mxrun c10d", "torchrun etcd-v2", "torchrun c10d")
         if k in os.environ.get("KINDS", "mxrun etcd,mxrun c10d,torchrun etcd-v2,torchrun c10d")
         .split(",")]
POLL = 0.005
WORK = tempfile.mkdtemp(prefix="mxrun-etcd-bench.")
procs = []  # every Popen of a case, killed by process group when the case ends
etcd_procs = []  # the etcd members, killed at the very end

WORKER = os.path.join(WORK, "worker.sh")
with open(WORKER, "w") as f:
    f.write('echo "$(date +%s.%N) $WORLD_SIZE $RANK" >> "$BENCH_LOG"\n'
            '[ -n "${BENCH_EXIT:-}" ] && exit 0\n'
            'exec sleep 600\n')


def progress(msg):
    print(f"etcd_ha: {msg}", file=sys.stderr, flush=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(cmd, log, env=None, keep=False):
    e = {k: v for k, v in os.environ.items()
         if not k.startswith(("PET_", "TORCHELASTIC_", "BENCH_"))}
    e.update(env or {})
    if not keep:
        e["MXBENCH_ETCD_HA"] = WORK   # found by stop_all, wherever the process ended up
    out = open(log + ".out", "wb")
    p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                         env=e, cwd=WORK, start_new_session=True)
    (etcd_procs if keep else procs).append(p)
    return p


def kill_group(p, sig=signal.SIGKILL):
    try:
        os.killpg(p.pid, sig)
    except ProcessLookupError:
        pass


def kill_node(p):
    """A node's death: the agent and everything under it (its workers may have their own groups)."""
    tree = descendants(p.pid)
    kill_group(p)
    for pid in tree:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def stop_all():
    for p in procs:
        if p.poll() is None:
            kill_group(p, signal.SIGTERM)
    deadline = time.monotonic() + 15
    for p in procs:
        try:
            p.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            kill_group(p)
            p.wait()
    procs.clear()
    # Workers whose agent died before it could stop them (torchrun 2.x starts each worker in a
    # session of its own, so they are in no agent's group): found by the marker start() set.
    kill_marked("MXBENCH_ETCD_HA=" + WORK)


def lines(log):
    try:
        with open(log) as f:
            return [tuple(float(x) for x in line.split()) for line in f.read().split("\n")[:-1]]
    except OSError:
        return []


def output(log):
    try:
        with open(log + ".out", "rb") as f:
            return f.read().decode(errors="replace")
    except OSError:
        return ""


def wait_until(pred, timeout, abort=None):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        r = pred()
        if r:
            return r
        if abort is not None and abort():
            return None
        time.sleep(POLL)
    return None


class Etcd:
    """3 etcd members on loopback (v2 enabled for torchrun's etcd-v2 backend)."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(dir=WORK, prefix="etcd.")
        ports = [(free_port(), free_port()) for _ in range(3)]
        cluster = ",".join(f"m{i}=http://127.0.0.1:{pp}" for i, (_, pp) in enumerate(ports))
        self.endpoints = [f"127.0.0.1:{cp}" for cp, _ in ports]
        self.members = []
        for i, (cp, pp) in enumerate(ports):
            self.members.append(start(
                ["/usr/bin/etcd", "--name", f"m{i}", "--data-dir", f"{self.dir}/m{i}",
                 "--listen-client-urls", f"http://127.0.0.1:{cp}",
                 "--advertise-client-urls", f"http://127.0.0.1:{cp}",
                 "--listen-peer-urls", f"http://127.0.0.1:{pp}",
                 "--initial-advertise-peer-urls", f"http://127.0.0.1:{pp}",
                 "--initial-cluster", cluster, "--initial-cluster-state", "new",
                 "--enable-v2", "--logger", "zap", "--log-level", "error"],
                f"{self.dir}/m{i}", keep=True))
        ok = wait_until(lambda: subprocess.run(
            ["/usr/bin/etcdctl", "--endpoints=" + ",".join(self.endpoints), "endpoint", "health"],
            env={"ETCDCTL_API": "3"}, capture_output=True).returncode == 0, 30)
        if not ok:
            raise SystemExit("etcd_ha: the etcd cluster did not become healthy")


def agent_cmd(kind, etcd, run_id, nnodes, host, conf=""):
    common = [f"--nnodes={nnodes}", "--nproc_per_node=1", "--max_restarts=0"]
    # One --rdzv_conf: a repeated flag replaces the earlier one, in torchrun and mxrun alike.
    rdzv_conf = "--rdzv_conf=last_call_timeout=1" + conf
    worker = ["--no_python", "sh", WORKER] if kind.startswith("mxrun") else [WORKER]
    if kind == "mxrun etcd":
        return [MXRUN, "--rdzv_backend=etcd", "--rdzv_endpoint=" + ",".join(etcd.endpoints),
                f"--rdzv_id={run_id}", rdzv_conf, *common, *worker]
    if kind == "mxrun c10d":
        return [MXRUN, "--rdzv_backend=c10d", f"--rdzv_endpoint={host}", f"--rdzv_id={run_id}",
                rdzv_conf, *common, *worker]
    if kind == "torchrun etcd-v2":
        return [TORCHRUN, "--rdzv_backend=etcd-v2",
                f"--rdzv_endpoint={etcd.endpoints[0]}", f"--rdzv_id={run_id}",
                "--rdzv_conf=last_call_timeout=1", *common, "--no_python", "sh", WORKER]
    return [TORCHRUN, "--rdzv_backend=c10d", f"--rdzv_endpoint={host}",
            f"--rdzv_id={run_id}", "--rdzv_conf=last_call_timeout=1", *common, "--no_python",
            "sh", WORKER]


def launch_job(kind, etcd, run_id, n, rundir, exit_at_once=False):
    """n agents; for c10d, agent 0 hosts the endpoint and starts first."""
    host = f"127.0.0.1:{free_port()}"
    env = {"BENCH_EXIT": "1"} if exit_at_once else {}
    nodes = []
    for i in range(n):
        log = os.path.join(rundir, f"node{i}")
        conf = ",is_host=0" if kind == "mxrun c10d" and i > 0 else ""
        nodes.append((start(agent_cmd(kind, etcd, run_id, f"{'2:3' if n == 3 else n}", host,
                                      conf), log, {**env, "BENCH_LOG": log}), log))
        if i == 0 and "c10d" in kind:
            port = int(host.rsplit(":", 1)[1])
            wait_until(lambda: subprocess.run(["ss", "-Hltn", f"sport = :{port}"],
                                              capture_output=True, text=True).stdout.strip(), 30)
    return nodes


def host_index(kind, nodes):
    if kind == "mxrun etcd":
        for i, (_, log) in enumerate(nodes):
            if "serving on" in output(log):
                return i
        return None
    if kind == "torchrun etcd-v2":
        for i, (_, log) in enumerate(nodes):  # node rank 0 (global rank 0's host)
            if any(int(l[2]) == 0 for l in lines(log)):
                return i
        return None
    return 0  # c10d: agent 0 hosts the store/master


def node_death(kind, etcd, which, idx):
    rundir = tempfile.mkdtemp(dir=WORK, prefix=f"{which}.")
    nodes = launch_job(kind, etcd, f"{which}-{kind.replace(' ', '-')}-{idx}", 3, rundir)
    try:
        if not wait_until(lambda: all(any(int(l[1]) == 3 for l in lines(log))
                                      for _, log in nodes), TIMEOUT):
            return None, "did not form the first round"
        # wait_until wants a true value: node 0 is a host too (index + 1, then back).
        found = wait_until(lambda: (lambda i: None if i is None else i + 1)(host_index(kind, nodes)),
                           5)
        host = None if found is None else found - 1
        if host is None:
            return None, "the master's host was not found"
        victim = host if which == "host" else (host + 1) % 3
        survivors = [log for i, (_, log) in enumerate(nodes) if i != victim]
        alive = [p for i, (p, _) in enumerate(nodes) if i != victim]
        t0 = time.time()
        kill_node(nodes[victim][0])
        done = wait_until(lambda: all(any(int(l[1]) == 2 and l[0] > t0 for l in lines(log))
                                      for log in survivors), TIMEOUT,
                          abort=lambda: all(p.poll() is not None for p in alive))
        if not done:
            exits = [p.poll() for p in alive]
            return None, (f"no re-formation within {TIMEOUT:.0f} s (survivors' exit codes "
                          f"{exits}; None: still running)")
        return max(min(l[0] for l in lines(log) if int(l[1]) == 2 and l[0] > t0)
                   for log in survivors) - t0, None
    finally:
        stop_all()


def standby(etcd, idx):
    rundir = tempfile.mkdtemp(dir=WORK, prefix="standby.")
    service = f"svc{idx}"
    masters = [start([MXRUN_MASTER, "--rdzv_backend=etcd",
                      "--rdzv_endpoint=" + ",".join(etcd.endpoints), f"--service={service}"],
                     os.path.join(rundir, f"master{i}")) for i in range(2)]
    try:
        logs = [os.path.join(rundir, f"master{i}") for i in range(2)]
        serving = wait_until(lambda: [i for i in range(2) if "serving on" in output(logs[i])], 30)
        agents = []
        for i in range(2):
            log = os.path.join(rundir, f"node{i}")
            agents.append((start([MXRUN, "--rdzv_backend=etcd",
                                  "--rdzv_endpoint=" + ",".join(etcd.endpoints),
                                  f"--rdzv_id=standby{idx}", "--nnodes=2", "--nproc_per_node=1",
                                  f"--rdzv_conf=master_service={service}", "--no_python", "sh",
                                  WORKER], log, {"BENCH_LOG": log}), log))
        if not wait_until(lambda: all(lines(log) for _, log in agents), TIMEOUT):
            return None, None, "did not form"
        first = serving[0]
        t0 = time.time()
        kill_group(masters[first])
        other = 1 - first
        took = wait_until(lambda: "serving on" in output(logs[other]) and time.time(), TIMEOUT)
        time.sleep(3)  # the agents re-attach (or would restart their workers: counted below)
        starts = sum(len(lines(log)) for _, log in agents)
        return (took - t0) if took else None, starts, None
    finally:
        stop_all()


def scale(kind, etcd, n, idx):
    rundir = tempfile.mkdtemp(dir=WORK, prefix=f"scale{n}.")
    t0 = time.time()
    nodes = launch_job(kind, etcd, f"scale{n}-{kind.replace(' ', '-')}-{idx}", n, rundir,
                       exit_at_once=True)
    try:
        if not wait_until(lambda: all(lines(log) for _, log in nodes), max(TIMEOUT, 5 * n)):
            return None
        return max(lines(log)[0][0] for _, log in nodes) - t0
    finally:
        stop_all()


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def fmt(x):
    return "—" if x is None else f"{x:.2f} s"


def phases_table(etcd):
    print("\n| mxrun etcd, N agents | elected master serving | first worker | last worker |")
    print("|---|---|---|---|")
    for n in SCALE_NODES:
        rows = []
        for i in range(RUNS):
            progress(f"phases {n} run {i + 1}/{RUNS}")
            rundir = tempfile.mkdtemp(dir=WORK, prefix=f"phases{n}.")
            t0 = time.time()
            nodes = launch_job("mxrun etcd", etcd, f"phases{n}-{i}", n, rundir, exit_at_once=True)
            served = None
            deadline = time.monotonic() + max(TIMEOUT, 5 * n)
            while time.monotonic() < deadline and not all(lines(log) for _, log in nodes):
                if served is None and any("serving on" in output(log) for _, log in nodes):
                    served = time.time() - t0
                time.sleep(POLL)
            starts = [lines(log)[0][0] - t0 for _, log in nodes if lines(log)]
            if served is not None and len(starts) == n:
                rows.append((served, min(starts), max(starts)))
            stop_all()
        cells = [fmt(med([r[k] for r in rows])) for k in range(3)]
        print(f"| {n} | " + " | ".join(cells) + " |")


def scale_table(etcd):
    print("\n| round formation, N agents | " + " | ".join(KINDS) + " | mxrun etcd / mxrun c10d |")
    print("|---|" + "---|" * (len(KINDS) + 1))
    for n in SCALE_NODES:
        row = {}
        for kind in KINDS:
            runs = RUNS if kind.startswith("mxrun") else max(1, RUNS // 2)
            xs = []
            for i in range(runs):
                progress(f"scale {n} {kind} run {i + 1}/{runs}")
                xs.append(scale(kind, etcd, n, i))
            row[kind] = med(xs)
        r = (row["mxrun etcd"] / row["mxrun c10d"]) if row.get("mxrun etcd") and row.get("mxrun c10d") else None
        print(f"| {n} | " + " | ".join(fmt(row[k]) for k in KINDS) +
              f" | {'—' if r is None else f'{r:.2f}'} |")


def torch_versions():
    """torch and python-etcd as torchrun's own interpreter (its #! line) sees them."""
    try:
        r = subprocess.run([torch_python(TORCHRUN), "-c", "import importlib.metadata as m, torch; "
                            "print(torch.__version__, m.version('python-etcd'))"],
                           capture_output=True, text=True, timeout=120)
        torch_v, etcd_v = r.stdout.split()
        return f"torch {torch_v}, python-etcd {etcd_v}"
    except (OSError, IndexError, ValueError, subprocess.SubprocessError):
        return "torch unknown"


def main():
    for b in (MXRUN, MXRUN_MASTER, TORCHRUN, "/usr/bin/etcd", "/usr/bin/etcdctl"):
        if not os.access(b, os.X_OK):
            raise SystemExit(f"etcd_ha: not found: {b}")
    etcd = Etcd()
    kinds = KINDS
    print("### No single point of failure: mxrun on etcd vs torchrun etcd-v2 and c10d\n")
    print(f"- command: `RUNS={RUNS} TIMEOUT={TIMEOUT:g} CASES=\"{' '.join(CASES)}\" "
          f"KINDS=\"{','.join(KINDS)}\" "
          f"SCALE_NODES=\"{' '.join(map(str, SCALE_NODES))}\""
          + ("" if TORCHRUN == DEFAULT_TORCHRUN else f" TORCHRUN={TORCHRUN}")
          + ("" if sys.executable == DEFAULT_PYTHON else f" PYTHON={sys.executable}")
          + " scripts/bench/etcd_ha.sh`")
    print(f"- torchrun: `{TORCHRUN}` ({torch_versions()})")
    print(f"- date: {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}; nproc={os.cpu_count()};"
          f" 3 etcd members (etcd {subprocess.run(['/usr/bin/etcd', '--version'], capture_output=True, text=True).stdout.split()[2]},"
          " default heartbeat 100 ms and election 1 s, --enable-v2) on loopback")
    print(f"- load average at start: {open('/proc/loadavg').read().split()[0]}\n")
    print("| case | " + " | ".join(kinds) + " |")
    print("|---|" + "---|" * len(kinds))
    notes = []
    for which, title in (("host", "master-host node SIGKILLed: survivors re-formed at world 2"),
                         ("other", "other node SIGKILLed: survivors re-formed at world 2")):
        if which not in CASES:
            continue
        cells = []
        for kind in kinds:
            times, why = [], None
            for i in range(RUNS):
                progress(f"{which} {kind} run {i + 1}/{RUNS}")
                t, w = node_death(kind, etcd, which, i)
                times.append(t)
                why = why or w
                if t is None:
                    break  # the same failure again would tell nothing new
            ok = [t for t in times if t is not None]
            cells.append(f"{fmt(med(ok))} ({len(ok)}/{len(times)} re-formed)" if ok
                         else f"never within {TIMEOUT:.0f} s")
            if why:
                notes.append(f"{kind}, {which}: {why}")
        print(f"| {title} | " + " | ".join(cells) + " |")
    takeovers, starts = [], []
    for i in range(RUNS if "standby" in CASES else 0):
        progress(f"standby run {i + 1}/{RUNS}")
        t, s, why = standby(etcd, i)
        takeovers.append(t)
        starts.append(s)
        if why:
            notes.append(f"standby: {why}")
    if "standby" in CASES:
        print(f"| standby mxrun-master SIGKILLed: standby serving (worker starts, 2 = none restarted) "
              f"| {fmt(med(takeovers))} (starts per run: {starts}) |" + " n/a |" * (len(kinds) - 1))
    if "scale" in CASES:
        scale_table(etcd)
    if "phases" in CASES:
        phases_table(etcd)
    if notes:
        print("\nNotes:\n" + "\n".join(f"- {n}" for n in notes))


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        main()
    finally:
        stop_all()
        procs.extend(etcd_procs)
        stop_all()
        shutil.rmtree(WORK, ignore_errors=True)
