#!/usr/bin/env python3
"""The rendezvous master at scale: rdzv_loadgen --reform against a fresh mxrun-master for each N
(default 1024, 4096, 16384 sessions from one process): round formation (first Join sent -> last
round received), re-formation after one session vanishes (its stream cancelled -> every
survivor's new round), the time to the job's end (every session reported success and was
finished), and the master's peak RSS (VmHWM). Targets (issue 14): 16,384 in under 5 s for
formation and re-formation, under 300 MiB.

With TLS=both every case also runs with mutual TLS (certificates made here with
scripts/make-certs.sh), interleaved run by run with the plaintext one, and AGENTS real `mxrun`
agents (default 32; 0: none) form a round through the master both ways: the time from their
start to the last worker's start. Target (issue 14): TLS under 20% slower.

With HEARTBEAT_S=S (default 0: off) every session then heartbeats once a second for S seconds,
as agents do, and the table adds the master's CPU over that window (CPU seconds per second) and
the share of heartbeats it answered (its Alive answers are how agents notice a silent master).

CHANNELS (default 32) is how many connections the load generator spreads the sessions over;
CHANNELS=session gives every session its own connection, as a cluster of agents does (each
connection costs the master its own transport, TLS handshake and buffers; needs N + 256 open
files in both processes: the soft limit is raised to the hard one).

With SCRAPE=both every case also runs with the master's metrics endpoint scraped once a second
by this script (GET /metrics, as Prometheus does), interleaved run by run with the master
without metrics (`--metrics_port=off`). Target (issue 26): formation within 10% of without.

With PROGRESS=both (needs HEARTBEAT_S) every case also runs with each session standing for a node
of RANKS workers (default 8) whose heartbeats carry their progress (step and step time per rank,
as agents pass their workers' reports on), interleaved run by run with empty heartbeats: the
master keeps every rank's progress and judges stragglers over all of them once a heartbeat
interval (issue 26). The table adds the master's CPU while heartbeating, both ways.

With PIN=1 the master runs on CPU 0 and the clients (the load generator, the agents) on CPU 1
(taskset), so that the two sides do not take each other's CPU, as on separate machines. The
table's "master CPU" column is the master's own CPU time over the whole run (user + system).

Environment: RUNS (default 3), NODES (default "1024 4096 16384"), TLS (off | both; default
off), HEARTBEAT_S (default 0), PROGRESS (off | both), RANKS (default 8), AGENTS (default 32, with
TLS=both), PIN (0 | 1), CHANNELS, SCRAPE (off | both), MXRUN, MXRUN_MASTER, RDZV_LOADGEN (default
<repo>/build/bin/...); master_scale.sh runs it with $PYTHON (default <repo>/.venv/bin/python3,
the project's venv).
Prints a Markdown table of medians on stdout; progress on stderr. The master and the load
generator run as private copies (a rebuild cannot swap them); every process it starts is
stopped by pid.
"""
import os
import re
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time
import urllib.request

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_common import (DEFAULT_MXRUN, DEFAULT_PYTHON, REPO, die, env, executable,  # noqa: E402
                          git_rev, is_whole, loadavg, make_workdir, nproc, private_copy,
                          run_main, sha256_12, signal_pid, status_kib, utc_now)

SCRIPT = "master_scale.sh"


def fail(msg):
    die(SCRIPT, msg)


# ---------------------------------------------------------------- settings
RUNS_S = env("RUNS", "3")
NODES_S = env("NODES", "1024 4096 16384")
MASTER_GIVEN = env("MXRUN_MASTER", os.path.join(REPO, "build/bin/mxrun-master"))
MXRUN = env("MXRUN", DEFAULT_MXRUN)   # not copied: it runs its mxrun-multinode sibling
TLS = env("TLS", "off")
SCRAPE = env("SCRAPE", "off")
PROGRESS = env("PROGRESS", "off")
RANKS_S = env("RANKS", "8")
HEARTBEAT_S_S = env("HEARTBEAT_S", "0")
AGENTS_S = env("AGENTS", "32")
PIN = env("PIN", "0")
CHANNELS = env("CHANNELS", "32")
LOADGEN_GIVEN = env("RDZV_LOADGEN", os.path.join(REPO, "build/bin/rdzv_loadgen"))

if SCRAPE not in ("off", "both"):
    fail("SCRAPE must be off or both")
if PROGRESS not in ("off", "both"):
    fail("PROGRESS must be off or both")
if not is_whole(RANKS_S) or int(RANKS_S) == 0:
    fail("RANKS must be a positive whole number")
if [TLS, SCRAPE, PROGRESS].count("both") > 1:
    fail("TLS, SCRAPE and PROGRESS: one comparison (=both) at a time")
if not is_whole(HEARTBEAT_S_S):
    fail("HEARTBEAT_S must be a whole number of seconds")
if PROGRESS == "both" and int(HEARTBEAT_S_S) == 0:
    fail("PROGRESS=both needs HEARTBEAT_S (progress rides on heartbeats)")
if CHANNELS != "session" and (not is_whole(CHANNELS) or int(CHANNELS) == 0):
    fail("CHANNELS must be a positive number or 'session'")
# Every session its own connection needs N + 256 open files: the soft limit up to the hard one.
try:
    _soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (_hard, _hard))
except (ValueError, OSError):
    pass
if PIN not in ("0", "1"):
    fail("PIN must be 0 or 1")
if PIN == "1" and nproc() < 2:
    fail("PIN=1 needs 2 CPUs")
if TLS not in ("off", "both"):
    fail("TLS must be off or both")
if not is_whole(AGENTS_S):
    fail("AGENTS must be a whole number")
if not is_whole(RUNS_S) or int(RUNS_S) == 0:
    fail("RUNS must be a positive integer")
if not all(is_whole(n) and int(n) > 0 for n in NODES_S.split()):
    fail("NODES must be positive integers")
for _b in (MASTER_GIVEN, LOADGEN_GIVEN):
    if not executable(_b):
        fail(f"not found or not executable: {_b} (build: cd build && ninja mxrun-master "
             "rdzv_loadgen)")
if TLS == "both" and not executable(MXRUN):
    fail(f"not found or not executable: {MXRUN}")

runs, nodes = int(RUNS_S), [int(n) for n in NODES_S.split()]
tls_modes = [False, True] if TLS == "both" else [False]
scrape_both = SCRAPE == "both"
progress_both = PROGRESS == "both"
ranks_per_node = int(RANKS_S)
if scrape_both or progress_both:
    tls_modes = [False, True]  # here: "with the metrics scraped" or "with progress" (no TLS)
agents = int(AGENTS_S) if TLS == "both" else 0
heartbeat_s = int(HEARTBEAT_S_S)
MASTER_PIN = ["taskset", "-c", "0"] if PIN == "1" else []
CLIENT_PIN = ["taskset", "-c", "1"] if PIN == "1" else []
per_session = CHANNELS == "session"
channels_of = (lambda n: n) if per_session else (lambda n: int(CHANNELS))
open_files = resource.getrlimit(resource.RLIMIT_NOFILE)[0]

WORK = make_workdir("mxrun-scale.")
master_bin = os.path.join(WORK, "mxrun-master")   # private copies (prepare)
loadgen_bin = os.path.join(WORK, "rdzv_loadgen")
mxrun_bin = MXRUN
pki = os.path.join(WORK, "pki")
TLS_FLAGS = [f"--cert={pki}/node.pem", f"--key={pki}/node.key", f"--cacert={pki}/ca.pem"]
TLS_CONF = f"cert={pki}/node.pem,key={pki}/node.key,cacert={pki}/ca.pem"
problems = []
started = []   # every Popen, stopped (if still running) when the benchmark ends


def prepare():
    """Private copies of the master and the load generator (a rebuild cannot swap them), and with
    TLS=both a CA and a node certificate for 127.0.0.1 (scripts/make-certs.sh)."""
    private_copy(MASTER_GIVEN, master_bin)
    private_copy(LOADGEN_GIVEN, loadgen_bin)
    if TLS == "both":
        make_certs = os.path.join(REPO, "scripts/make-certs.sh")
        for args in (["ca"], ["node", "node", "127.0.0.1", "localhost"]):
            r = subprocess.run([make_certs, pki] + args, stdin=subprocess.DEVNULL,
                               stdout=subprocess.DEVNULL)
            if r.returncode != 0:
                sys.exit(f"{SCRIPT}: {make_certs} {pki} {' '.join(args)} failed (exit code "
                         f"{r.returncode})")


def print_header():
    python_override = "" if sys.executable == DEFAULT_PYTHON else f" PYTHON={sys.executable}"
    print("## The rendezvous master at scale")
    print()
    print(f"- command: `RUNS={RUNS_S} NODES=\"{NODES_S}\" TLS={TLS} AGENTS={AGENTS_S} "
          f"HEARTBEAT_S={HEARTBEAT_S_S} PIN={PIN} CHANNELS={CHANNELS} SCRAPE={SCRAPE} "
          f"PROGRESS={PROGRESS} RANKS={RANKS_S}{python_override} scripts/bench/master_scale.sh"
          + "".join(" " + a for a in sys.argv[1:]) + "`")
    print(f"- date: {utc_now()}; nproc={nproc()}; repo at {git_rev(mark_modified=False)}")
    print(f"- master: `{MASTER_GIVEN}` (sha256 {sha256_12(master_bin)}...)")
    print(f"- load average at start: {loadavg()}")
    print(flush=True)


def ratio(a, b):
    """a / b as "1.23x", or "n/a" where b is 0 (a tiny N can re-form within the clock's 1 ms)."""
    return f"{a / b:.2f}x" if b else "n/a"


def cpu_seconds(pid):
    """The process's user + system CPU time so far (s), or None."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


def start_master(label, tls):
    """With SCRAPE=both, `tls` means: metrics on (scraped); the other variant has them off."""
    out_path = os.path.join(WORK, f"master_{label}.out")
    if scrape_both:
        extra = ["--metrics_port=0"] if tls else ["--metrics_port=off"]
    elif progress_both:
        extra = ["--metrics_port=off"]
    else:
        extra = (TLS_FLAGS if tls else []) + ["--metrics_port=off"]
    with open(out_path, "wb") as out:
        master = subprocess.Popen(MASTER_PIN + [master_bin, "--port=0"] + extra,
                                  stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT)
    started.append(master)
    port, deadline = None, time.monotonic() + 30
    master.metrics_url = None
    while time.monotonic() < deadline and master.poll() is None:
        text = open(out_path).read()
        m = re.search(r"listening on 127\.0\.0\.1:(\d+)", text)
        port = int(m.group(1)) if m else None
        u = re.search(r"metrics at (http://\S+)", text)
        master.metrics_url = u.group(1) if u else None
        if port is not None and (master.metrics_url or not (scrape_both and tls)):
            break
        time.sleep(0.02)
    return master, port


class Scraper(threading.Thread):
    """GET url once a second until stopped; counts scrapes and keeps the slowest."""
    def __init__(self, url):
        super().__init__(daemon=True)
        self.url, self.stop_flag, self.count, self.slowest = url, threading.Event(), 0, 0.0

    def run(self):
        while not self.stop_flag.is_set():
            t0 = time.monotonic()
            try:
                with urllib.request.urlopen(self.url, timeout=5) as r:
                    r.read()
                self.count += 1
            except OSError as e:
                problems.append(f"scrape of {self.url} failed: {e}")
            self.slowest = max(self.slowest, time.monotonic() - t0)
            self.stop_flag.wait(max(0.0, 1.0 - (time.monotonic() - t0)))


def stop(proc):
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()


def agents_round(count, idx, tls):
    """count real mxrun agents through a fresh master: start -> last worker started (s)."""
    master, port = start_master(f"agents_{idx}_{tls}", tls)
    procs = []
    try:
        if port is None:
            problems.append(f"agents #{idx}: the master reported no port")
            return None
        d = os.path.join(WORK, f"agents_{idx}_{int(tls)}")
        os.mkdir(d)
        conf = "is_host=0" + ("," + TLS_CONF if tls else "")
        t0 = time.time()
        for i in range(count):
            procs.append(subprocess.Popen(
                CLIENT_PIN + [mxrun_bin, "--rdzv_backend=c10d", f"--rdzv_endpoint=127.0.0.1:{port}",
                 f"--rdzv_id=agents{idx}{int(tls)}", f"--nnodes={count}", "--nproc_per_node=1",
                 f"--rdzv_conf={conf}", "--no_python", "sh", "-c",
                 f"date +%s.%N > {d}/start.$RANK"],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
            started.append(procs[-1])
        codes = [p.wait(timeout=120) for p in procs]
        if any(codes):
            problems.append(f"agents #{idx} tls={tls}: exit codes {codes}")
            return None
        starts = [float(open(os.path.join(d, f)).read()) for f in os.listdir(d)]
        if len(starts) != count:
            problems.append(f"agents #{idx} tls={tls}: {len(starts)} of {count} workers started")
            return None
        return max(starts) - t0
    finally:
        for p in procs:
            stop(p)
        stop(master)


def one(n, idx, tls=False):
    if channels_of(n) + 256 > open_files:
        problems.append(f"N={n}: {channels_of(n)} connections need {channels_of(n) + 256} open "
                        f"files; the limit here is {open_files}")
        return None
    master, port = start_master(f"{n}_{idx}_{int(tls)}", tls)
    scraper = Scraper(master.metrics_url) if scrape_both and tls and master.metrics_url else None
    if scraper:
        scraper.start()
    try:
        if port is None:
            problems.append(f"N={n} #{idx}: the master reported no port")
            return None
        lg = subprocess.run(CLIENT_PIN + [loadgen_bin, f"--endpoint=127.0.0.1:{port}", f"--nodes={n}",
                             f"--channels={channels_of(n)}", f"--run_id=scale{n}x{idx}", f"--timeout={100 + heartbeat_s}",
                             "--reform"] + (TLS_FLAGS if tls and not (scrape_both or progress_both) else []) +
                            ([f"--ranks_per_node={ranks_per_node}"] if progress_both and tls else []) +
                            ([f"--heartbeat_s={heartbeat_s}", f"--master_pid={master.pid}"]
                             if heartbeat_s else []),
                            capture_output=True, text=True, timeout=150 + heartbeat_s)
        m = re.search(r"form_s=([0-9.]+) finish_s=([0-9.]+) rounds_ok=(\d+) finished=(-?\d+) "
                      r"reform_s=([0-9.]+) reformed=(\d+)", lg.stdout)
        if lg.returncode != 0 or not m or int(m.group(3)) != n or int(m.group(6)) != n - 1:
            problems.append(f"N={n} #{idx}: rdzv_loadgen exit {lg.returncode}: "
                            f"{(lg.stdout + lg.stderr).strip()[:300]}")
            return None
        beat = re.search(r"beats=(\d+) alive=(\d+) master_cpu=([0-9.]+)", lg.stdout)
        if heartbeat_s and not beat:
            problems.append(f"N={n} #{idx}: no heartbeat figures: {lg.stdout.strip()[:300]}")
            return None
        cpu = float(beat.group(3)) if beat else None
        answered = int(beat.group(2)) / max(1, int(beat.group(1))) if beat else None
        if scraper:
            print(f"master_scale.sh: N={n} #{idx}: {scraper.count} scrapes, slowest "
                  f"{scraper.slowest * 1000:.0f} ms", file=sys.stderr, flush=True)
        return (float(m.group(1)), float(m.group(5)), float(m.group(2)), status_kib(master.pid, "VmHWM"),
                cpu, answered, cpu_seconds(master.pid))
    finally:
        if scraper:
            scraper.stop_flag.set()
            scraper.join(10)
        stop(master)


def main():
    prepare()
    print_header()
    rows = []
    for n in nodes:
        results = {tls: [] for tls in tls_modes}
        for idx in range(runs):
            for tls in tls_modes:  # interleaved: both see the same background load
                r = one(n, idx, tls)
                print(f"master_scale.sh: N={n} #{idx} tls={tls}: {r}", file=sys.stderr, flush=True)
                if r:
                    results[tls].append(r)
        for tls in tls_modes:
            rows.append((n, tls, results[tls]))

    hb_head = " master CPU while heartbeating | heartbeats answered |" if heartbeat_s else ""
    variant_name = ("metrics scraped 1/s" if scrape_both else
                    f"{ranks_per_node} ranks' progress in heartbeats" if progress_both else "mutual TLS")
    print(f"| sessions | {variant_name} | formation | re-formation after one loss | to the job's end | master peak RSS | master CPU |" + hb_head + " runs (formation / re-formation, s) |")
    print("|---:|:---:|---:|---:|---:|---:|---:|" + ("---:|---:|" if heartbeat_s else "") + "---|")
    medians = {}
    for n, tls, results in rows:
        if not results:
            print(f"| {n} | {'yes' if tls else 'no'} | n/a | n/a | n/a | n/a | n/a |" + (" n/a | n/a |" if heartbeat_s else "") + " |")
            continue
        med = lambda i: statistics.median(r[i] for r in results)
        medians[(n, tls)] = (med(0), med(1), med(6), med(4) if heartbeat_s else None)
        runs_text = ", ".join(f"{r[0]:.2f} / {r[1]:.2f}" for r in results)
        hb = f" {med(4):.2f} CPU | {100 * med(5):.1f}% |" if heartbeat_s else ""
        print(f"| {n} | {'yes' if tls else 'no'} | {med(0):.2f} s | {med(1):.2f} s | {med(2):.2f} s | {med(3) / 1024:.0f} MiB | {med(6):.2f} s |{hb} {runs_text} |")
    if len(tls_modes) == 2:
        title, target = (("metrics scraped 1/s against off", "formation < 1.10x") if scrape_both
                         else ("progress in heartbeats against empty ones", "none set (measured)")
                         if progress_both else ("mutual TLS against plaintext", "< 1.20x"))
        hb_ratio = " master CPU while heartbeating |" if heartbeat_s else ""
        print()
        print(f"| {title} | formation | re-formation | master CPU |{hb_ratio} target |")
        print("|---|---:|---:|---:|" + ("---:|" if heartbeat_s else "") + "---|")
        for n in nodes:
            if (n, True) in medians and (n, False) in medians:
                a, b = medians[(n, True)], medians[(n, False)]
                hb = f" {a[3]:.2f} / {b[3]:.2f} CPU ({a[3] / max(b[3], 1e-9):.2f}x) |" if heartbeat_s else ""
                print(f"| {n} sessions | {ratio(a[0], b[0])} | {ratio(a[1], b[1])} | {ratio(a[2], b[2])} |{hb} {target} |")
        if agents and not scrape_both:
            times = {False: [], True: []}
            for idx in range(runs):
                for tls in tls_modes:
                    t = agents_round(agents, idx, tls)
                    print(f"master_scale.sh: {agents} agents #{idx} tls={tls}: {t}", file=sys.stderr, flush=True)
                    if t is not None:
                        times[tls].append(t)
            if times[False] and times[True]:
                a, b = statistics.median(times[True]), statistics.median(times[False])
                print(f"| {agents} real agents (start -> last worker started) | {b:.2f} s -> {a:.2f} s, {a / b:.2f}x | | | < 1.20x |")
    print()
    print("Each run: a fresh `mxrun-master --port=0` (with TLS: `--cert --key --cacert`), then `rdzv_loadgen --endpoint=127.0.0.1:PORT "
          f"--nodes=N --channels={'N' if per_session else CHANNELS} --reform` (N sessions over "
          f"{'as many connections' if per_session else CHANNELS + ' connections'} from one process, job --nnodes=N-1:N; "
          "once formed, session 0's stream is cancelled and every survivor joins again at once).")
    if problems:
        print()
        print("Problems:")
        for p in problems:
            print(f"- {p}")


def cleanup():
    for p in started:
        if p.poll() is None:
            signal_pid(p.pid)
            p.wait()
    shutil.rmtree(WORK, ignore_errors=True)


if __name__ == "__main__":
    run_main(main, cleanup)
