"""The soak (issue 38, item 3): a 3-node job of the bundled trainer on this host (a standalone
mxrun-master and three agents on loopback, one worker and one warm standby each) runs for
SOAK_MINUTES (default 20) while a random fault from the catalogue's same-world rows
(tests/faults/catalogue.h) strikes every SOAK_MIN_GAP to SOAK_MAX_GAP seconds (10 to 30), chosen by
a seeded generator (SOAK_SEED, default 1) so that a failing soak can be replayed. Then it checks:

  - at least SOAK_MIN_FAULTS faults (default 1) were injected before the job ended;
  - every agent ended 0;
  - the final parameters, buffers and momentum equal, bit for bit, those of the same job run
    without faults first (the "twin"; the world size never changes here);
  - every fault is in the job's own account exactly once: each worker fault as one restart line
    of the agents' summary with its rank and cause, and in the master's status (failures by
    cause, restarts spent); each standby's death as one warning of its node;
  - no completed step was trained twice;
  - nothing is left: no process of the job, no listening port of it, no scratch folder;
  - the master's memory did not grow without bound (its peak in the soak's second half at most
    1.25 times that of the first half, plus 8 MiB).

The report (markdown, on stdout) lists the faults by type with their recoveries, the steps lost,
mxrun's goodput and the master's memory; exit 0 when every check holds, 1 otherwise. A failed soak
keeps its folder (consoles, metrics, hang reports) and names it; SOAK_KEEP=1 keeps it always.

    SOAK_MINUTES=20 SOAK_SEED=7 scripts/bench/soak.sh > soak.md

Faults: worker-sigkill, worker-sigsegv, worker-sigstop (with --hang_timeout), standby-dies
(SOAK_FAULTS, comma-separated, narrows the set). The job is sized to last about SOAK_MINUTES from
a short calibration run; injecting stops at SOAK_MINUTES and the job then runs to its end.
"""
import json, os, random, re, shutil, signal, subprocess, sys, threading, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_common import (Log, REPO, die, env, free_port, git_rev, kill_tree, machine,  # noqa: E402
                          make_workdir, pids_marked, print_problems, run_main, signal_pid,
                          status_kib, utc_now, wait_until)

SCRIPT = "soak.py"
FAULTS = ("worker-sigkill", "worker-sigsegv", "worker-sigstop", "standby-dies")
HANG_TIMEOUT = 5  # --hang_timeout for the SIGSTOP fault
RECOVERY_TIMEOUT = 120  # a fault not recovered from within this is a failed check
log = Log(SCRIPT)
state = {"workdir": None, "procs": [], "failed": False}


def number(name, default, kind):
    """The environment variable `name` as a `kind` (int or float), or exit 2 saying what it was."""
    text = env(name, default)
    try:
        return kind(text)
    except ValueError:
        die(SCRIPT, f"{name}={text!r}: accepted: {'a whole number' if kind is int else 'a number'}")


def settings():
    s = {
        "minutes": number("SOAK_MINUTES", "20", float),
        "seed": number("SOAK_SEED", "1", int),
        "min_gap": number("SOAK_MIN_GAP", "10", float),
        "max_gap": number("SOAK_MAX_GAP", "30", float),
        "min_faults": number("SOAK_MIN_FAULTS", "1", int),
        "faults": [f for f in env("SOAK_FAULTS", ",".join(FAULTS)).split(",") if f],
        "bin": env("MXRUN_BIN_DIR", os.path.join(REPO, "build/bin")),
    }
    if not 0 < s["minutes"] <= 24 * 60:
        die(SCRIPT, f"SOAK_MINUTES={s['minutes']}: accepted: more than 0, at most 1440")
    if s["min_faults"] < 0:
        die(SCRIPT, f"SOAK_MIN_FAULTS={s['min_faults']}: accepted: 0 or more")
    if not 1 <= s["min_gap"] <= s["max_gap"]:
        die(SCRIPT, "SOAK_MIN_GAP and SOAK_MAX_GAP: accepted: 1 <= min <= max (seconds)")
    for f in s["faults"]:
        if f not in FAULTS:
            die(SCRIPT, f"SOAK_FAULTS: unknown fault '{f}'; accepted: {', '.join(FAULTS)}")
    for b in ("mxrun", "mxrun-master", "train"):
        if not os.access(os.path.join(s["bin"], b), os.X_OK):
            die(SCRIPT, f"{b} not found in {s['bin']} (build first: scripts/build.sh)")
    return s


def start(cmd, out_path, env_extra=None):
    environ = dict(os.environ)
    environ.update(env_extra or {})
    out = open(out_path, "wb")
    p = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=environ,
                         start_new_session=True)
    out.close()
    state["procs"].append(p)
    return p


def read(path):
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def metrics(path, event=None):
    records = []
    for line in read(path).splitlines():
        if line.strip():
            r = json.loads(line)
            if event is None or r["event"] == event:
                records.append(r)
    return records


def start_master(s, wd):
    port = free_port()
    master = start([os.path.join(s["bin"], "mxrun-master"), "--host=127.0.0.1", f"--port={port}",
                    "--metrics_port=0"], os.path.join(wd, "master.log"))
    if not wait_until(lambda: "listening on" in read(os.path.join(wd, "master.log")), 20, poll=0.05):
        raise RuntimeError("mxrun-master did not start: " + read(os.path.join(wd, "master.log")))
    return master, f"127.0.0.1:{port}"


def start_job(s, wd, name, steps, endpoint, run_id, hang):
    """Three agents of run `run_id`, the trainer for `steps` steps; their consoles in wd."""
    ckpt = os.path.join(wd, name + "-ckpt")
    agents = []
    for node in range(3):
        cmd = [os.path.join(s["bin"], "mxrun"), "--rdzv_backend=c10d", f"--rdzv_endpoint={endpoint}",
               f"--rdzv_id={run_id}", "--nnodes=3", f"--node_rank={node}", "--nproc_per_node=1",
               "--max_restarts=100000", "--standby_workers=1", "--metrics_port=0"]
        if hang:
            cmd.append(f"--hang_timeout={HANG_TIMEOUT}")
        cmd += ["train", "--width", "8", "--synthetic_train", "1536", "--synthetic_test", "32",
                "--batch_size", "32", "--lr", "0.05", "--epochs", "1000", "--max_steps", str(steps),
                "--log_every", "1", "--ckpt_every", "50", "--no_eval", "--ckpt_dir", ckpt,
                "--metrics_file", os.path.join(wd, name + ".jsonl")]
        # Their scratch folders and hang reports in the soak's own TMPDIR (checked, then removed).
        agents.append(start(cmd, os.path.join(wd, f"{name}-node{node}.log"),
                            {"TMPDIR": os.path.join(wd, "tmp")}))
    return agents


def wait_job(agents, timeout):
    deadline = time.monotonic() + timeout
    for a in agents:
        try:
            a.wait(max(1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            return None
    return [a.returncode for a in agents]


def done_digest(wd, name, key="state_sha256"):
    """The final state's digest: "state_sha256" (parameters, buffers, momentum) or
    "weights_sha256" (parameters and momentum)."""
    done = metrics(os.path.join(wd, name + ".jsonl"), "done")
    return done[-1].get(key) if len(done) == 1 else None


def step_seconds(wd, name):
    """The mean time of a step (first to last record): the slow ones count, as in the long run."""
    times = [r["time"] for r in metrics(os.path.join(wd, name + ".jsonl"), "step")]
    return (times[-1] - times[0]) / (len(times) - 1) if len(times) > 1 else None


def children(pid):
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(x) for x in f.read().split()]
    except OSError:
        return []


def has_rank(pid):
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            return any(e.startswith(b"RANK=") for e in f.read().split(b"\0"))
    except OSError:
        return False


def is_stopped(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] in ("T", "t")
    except OSError:
        return False


class Node:
    """One agent, with its worker and standby told apart from its console."""

    def __init__(self, index, proc, log_path):
        self.index, self.proc, self.log_path = index, proc, log_path

    def standbys(self):
        text = read(self.log_path)
        started = set(int(p) for p in re.findall(r"standby worker started \(pid (\d+)\)", text))
        promoted = set(int(p) for p in re.findall(r"\(standby pid (\d+)\)", text))
        ended = set(int(p) for p in re.findall(r"standby worker \(pid (\d+)\) ended", text))
        ready = set(int(p) for p in re.findall(r"standby worker \(pid (\d+)\): ready", text))
        alive = set(children(self.proc.pid))
        return sorted(p for p in started - promoted - ended if p in ready and p in alive)

    def worker(self):
        """The worker holding the node's rank: a child started with one (RANK in its
        environment), or a standby promoted since (its environment has none)."""
        text = read(self.log_path)
        spare = set(int(p) for p in re.findall(r"standby worker started \(pid (\d+)\)", text))
        promoted = set(int(p) for p in re.findall(r"\(standby pid (\d+)\)", text))
        workers = [c for c in children(self.proc.pid)
                   if c in promoted or (c not in spare and has_rank(c))]
        return workers[0] if len(workers) == 1 else None

    def count(self, needle):
        return read(self.log_path).count(needle)


def master_status(s, endpoint, run_id):
    r = subprocess.run([os.path.join(s["bin"], "mxrun"), "status", f"--rdzv_endpoint={endpoint}",
                        f"--rdzv_id={run_id}", "--json"], capture_output=True, text=True, timeout=30)
    if r.returncode != 0:
        return None
    runs = json.loads(r.stdout).get("runs", [])
    return runs[0] if runs else None


def inject(s, rng, nodes, wd, name):
    """One fault; returns (kind, node, pid) or None when its target is not there now."""
    kind = rng.choice(s["faults"])
    node = nodes[rng.randrange(len(nodes))]
    if kind == "standby-dies":
        standbys = node.standbys()
        if not standbys:
            return None
        pid, sig = standbys[0], signal.SIGKILL
    else:
        pid = node.worker()
        if pid is None or is_stopped(pid):
            return None
        sig = {"worker-sigkill": signal.SIGKILL, "worker-sigsegv": signal.SIGSEGV,
               "worker-sigstop": signal.SIGSTOP}[kind]
    try:
        os.kill(pid, sig)
    except ProcessLookupError:  # it ended between the look and the kill
        return None
    return kind, node, pid


def recovered(kind, node, pid, before, wd, name):
    """Whether the job is whole again after the fault: a worker fault's recovery record written
    (a step trained after it), a standby's replacement ready."""
    if kind == "standby-dies":
        return node.count(": ready to take a rank in-process") > before["ready"][node.index]
    return len(metrics(os.path.join(wd, name + ".jsonl"), "recovery")) > before["recoveries"]


def main():
    s = settings()
    wd = state["workdir"] = make_workdir("mxrun-soak-")
    os.mkdir(os.path.join(wd, "tmp"))
    rng = random.Random(s["seed"])
    duration = s["minutes"] * 60
    log.progress(f"soak of {s['minutes']:g} min, seed {s['seed']}, faults every "
                 f"{s['min_gap']:g}-{s['max_gap']:g} s from {', '.join(s['faults'])}; in {wd}")
    master, endpoint = start_master(s, wd)
    hang = "worker-sigstop" in s["faults"]

    # Calibration: the step time of this job on this machine, without faults.
    agents = start_job(s, wd, "calib", 30, endpoint, "soak-calib", hang)
    if wait_job(agents, 300) != [0, 0, 0]:
        raise RuntimeError("the calibration job failed: " + read(os.path.join(wd, "calib-node0.log")))
    per_step = step_seconds(wd, "calib") or 0.1
    steps = max(60, int(duration * 0.8 / per_step))
    log.progress(f"calibration: {per_step * 1000:.0f} ms a step; the job trains {steps} steps")

    # The twin: the same job without faults, for the final state.
    t0 = time.monotonic()
    agents = start_job(s, wd, "twin", steps, endpoint, "soak-twin", hang)
    if wait_job(agents, duration * 4 + 300) != [0, 0, 0]:
        raise RuntimeError("the fault-free twin failed: " + read(os.path.join(wd, "twin-node0.log")))
    twin_seconds = time.monotonic() - t0
    twin_digest = done_digest(wd, "twin")
    twin_weights = done_digest(wd, "twin", "weights_sha256")
    log.progress(f"twin: {twin_seconds:.0f} s, state {twin_digest[:12]}")

    # The soak.
    run_id = f"soak-{s['seed']}"
    agents = start_job(s, wd, "soak", steps, endpoint, run_id, hang)
    nodes = [Node(i, a, os.path.join(wd, f"soak-node{i}.log")) for i, a in enumerate(agents)]
    rss = []  # (seconds since start, master VmRSS KiB)
    stop_sampling = threading.Event()

    def sample():
        while not stop_sampling.wait(2):
            kib = status_kib(master.pid, "VmRSS")
            if kib:
                rss.append((time.monotonic() - t_start, kib))

    t_start = time.monotonic()
    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    injected, skipped = [], 0
    status_problems = []
    while time.monotonic() - t_start < duration and all(a.poll() is None for a in agents):
        gap = rng.uniform(s["min_gap"], s["max_gap"])
        if wait_until(lambda: any(a.poll() is not None for a in agents), gap, poll=0.2):
            break
        if time.monotonic() - t_start >= duration:
            break
        before = {"ready": [n.count(": ready to take a rank in-process") for n in nodes],
                  "recoveries": len(metrics(os.path.join(wd, "soak.jsonl"), "recovery"))}
        hit = inject(s, rng, nodes, wd, "soak")
        if hit is None:
            skipped += 1
            continue
        kind, node, pid = hit
        at = time.monotonic() - t_start
        ok = wait_until(lambda: recovered(kind, node, pid, before, wd, "soak"), RECOVERY_TIMEOUT,
                        abort=lambda: any(a.poll() is not None for a in agents), poll=0.2)
        took = time.monotonic() - t_start - at
        injected.append({"kind": kind, "node": node.index, "pid": pid, "at": at,
                         "recovered": bool(ok), "seconds": took})
        log.progress(f"{at:7.1f} s: {kind} on node {node.index} (pid {pid}): "
                     f"{'recovered' if ok else 'NOT recovered'} in {took:.1f} s")
        if not ok:
            log.warn(f"{kind} at {at:.1f} s on node {node.index} not recovered from within "
                     f"{RECOVERY_TIMEOUT} s")
            break
        # The master's account so far: every worker fault a failure by cause, a restart spent.
        worker_faults = [f for f in injected if f["kind"] != "standby-dies"]
        status = master_status(s, endpoint, run_id)
        if status is not None:
            want = {"signal": sum(f["kind"] in ("worker-sigkill", "worker-sigsegv")
                                  for f in worker_faults),
                    "hang": sum(f["kind"] == "worker-sigstop" for f in worker_faults)}
            have = {k: status.get("failures", {}).get(k, 0) for k in want}
            if have != want or status.get("restarts_spent") != len(worker_faults):
                status_problems.append(f"after {len(injected)} faults the master's status says "
                                       f"failures {status.get('failures')}, restarts spent "
                                       f"{status.get('restarts_spent')}; expected {want}, "
                                       f"{len(worker_faults)}")
    log.progress(f"injecting stopped after {time.monotonic() - t_start:.0f} s; the job runs to its "
                 "end")
    codes = wait_job(agents, duration * 4 + 600)
    soak_seconds = time.monotonic() - t_start
    stop_sampling.set()
    sampler.join()
    status_after = master_status(s, endpoint, run_id)
    master.send_signal(signal.SIGTERM)
    try:
        master.wait(30)
    except subprocess.TimeoutExpired:
        kill_tree(master.pid)

    # Checks.
    problems = list(status_problems)
    if len(injected) < s["min_faults"]:
        problems.append(f"{len(injected)} faults injected, fewer than SOAK_MIN_FAULTS="
                        f"{s['min_faults']}: the job ended too soon ({skipped} draws found "
                        "no target)")
    if codes != [0, 0, 0]:
        problems.append(f"the agents ended {codes} (0, 0, 0 expected)")
    # Parameters and momentum always bit for bit; BatchNorm's running statistics too unless rank 0
    # (node 0's worker) was lost: they are each rank's own, never reduced in training, so rank 0's
    # die with it and the new rank 0 takes a kept rank's (the trainer's state_digest.h).
    worker_faults = [f for f in injected if f["kind"] != "standby-dies"]
    rank0_lost = sum(f["node"] == 0 for f in worker_faults)
    digest = done_digest(wd, "soak")
    weights = done_digest(wd, "soak", "weights_sha256")
    same_weights = weights is not None and weights == twin_weights
    same = digest is not None and digest == twin_digest
    if not same_weights:
        problems.append(f"final parameters and momentum {weights} differ from the twin's "
                        f"{twin_weights}")
    if not same and not rank0_lost:
        problems.append(f"final state {digest} differs from the twin's {twin_digest} (rank 0 was "
                        "never lost)")
    console0 = read(nodes[0].log_path)
    restart_lines = re.findall(r"mxrun: info: (?:in-process )?restart \d+ \(round \d+[^;]*; ([^)]*\))",
                               console0)
    if len(restart_lines) != len(worker_faults):
        problems.append(f"{len(restart_lines)} restart lines in node 0's summary for "
                        f"{len(worker_faults)} worker faults")
    else:
        words = {"worker-sigkill": "Signal 9 (SIGKILL)", "worker-sigsegv": "Signal 11 (SIGSEGV)",
                 "worker-sigstop": "hung ("}
        for f, line in zip(worker_faults, restart_lines):
            if words[f["kind"]] not in line:
                problems.append(f"{f['kind']} at {f['at']:.1f} s summarised as '{line}'")
    for f in injected:
        if f["kind"] == "standby-dies":
            said = nodes[f["node"]].count(f"standby worker (pid {f['pid']}) ended (SIGKILL)")
            if said != 1:
                problems.append(f"standby {f['pid']}'s death told {said} times on node {f['node']}")
    recoveries = metrics(os.path.join(wd, "soak.jsonl"), "recovery")
    steps_logged = [r["step"] for r in metrics(os.path.join(wd, "soak.jsonl"), "step")]
    steps_lost = max(len(steps_logged) - len(set(steps_logged)),
                     sum(r["steps_redone"] for r in recoveries))
    if steps_lost:
        problems.append(f"{steps_lost} completed steps trained again (0 expected: a survivor holds "
                        "the state each time)")
    goodput = re.search(r"goodput ([0-9.]+)%", console0)
    # Memory: the master's peak in the second half against the first half's.
    half = soak_seconds / 2
    first = max((k for t, k in rss if t < half), default=None)
    second = max((k for t, k in rss if t >= half), default=None)
    if first and second and second > first * 1.25 + 8 * 1024:
        problems.append(f"the master's memory grew: peak {first / 1024:.1f} MiB in the first half, "
                        f"{second / 1024:.1f} MiB in the second")
    # Leftovers: processes of the job (their environment names the run), scratch folders.
    time.sleep(1)
    left = pids_marked(f"TORCHELASTIC_RUN_ID={run_id}")
    if left:
        problems.append(f"processes of the job left running: {left}")
        for pid in left:
            signal_pid(pid)
    # (Hang reports, mxrun-hang-*, are kept on purpose: one per node per hang.)
    scratch_left = sorted(d for d in os.listdir(os.path.join(wd, "tmp"))
                          if not d.startswith("mxrun-hang-"))
    if scratch_left:
        problems.append(f"scratch folders left in the agents' TMPDIR: {scratch_left}")
    hang_reports = [d for d in os.listdir(os.path.join(wd, "tmp")) if d.startswith("mxrun-hang-")]
    listening = subprocess.run(["ss", "-ltnpH"], capture_output=True, text=True).stdout
    mine = [line for line in listening.splitlines()
            if any(f"pid={p.pid}," in line for p in state["procs"])]
    if mine:
        problems.append(f"ports still listening: {mine}")

    # The report.
    by_kind = {}
    for f in injected:
        k = by_kind.setdefault(f["kind"], {"n": 0, "ok": 0, "secs": []})
        k["n"] += 1
        k["ok"] += f["recovered"]
        k["secs"].append(f["seconds"])
    print(f"## Soak: {s['minutes']:g} minutes, seed {s['seed']}\n")
    print(f"`SOAK_MINUTES={s['minutes']:g} SOAK_SEED={s['seed']} scripts/bench/soak.sh` on "
          f"{utc_now()}, git {git_rev()}, {machine()}.\n")
    print(f"A 3-node job of the bundled trainer (ResNet-18 at 1/8 width, synthetic data, Gloo on "
          f"CPU, one worker and one warm standby per node, all on this host) trained {steps} "
          f"steps; a fault every {s['min_gap']:g}-{s['max_gap']:g} s for {s['minutes']:g} min "
          f"({skipped} draws found no target and were skipped).\n")
    print("| fault | injected | recovered | recovery, median s | slowest s |")
    print("|---|---:|---:|---:|---:|")
    for kind in FAULTS:
        if kind in by_kind:
            k = by_kind[kind]
            secs = sorted(k["secs"])
            print(f"| {kind} | {k['n']} | {k['ok']} | {secs[len(secs) // 2]:.1f} | {secs[-1]:.1f} |")
    print(f"| **all** | {len(injected)} | {sum(f['recovered'] for f in injected)} | | |\n")
    print(f"- Completed steps trained again: {steps_lost}.")
    print(f"- Final parameters and momentum {'equal, bit for bit, to' if same_weights else 'DIFFERENT from'} "
          f"the fault-free twin's ({(weights or 'none')[:16]}); with the BatchNorm running "
          f"statistics {'equal too' if same else 'different'}" +
          (f" (rank 0 was lost {rank0_lost} time(s): its own running statistics went with it)"
           if rank0_lost and not same else "") + ".")
    print(f"- Wall time: {soak_seconds:.0f} s with faults, {twin_seconds:.0f} s for the twin "
          f"({(soak_seconds - twin_seconds) / max(1, len(injected)):.1f} s per fault).")
    print(f"- mxrun's goodput (node 0): {goodput.group(1) + '%' if goodput else 'not printed'}.")
    if rss:
        print(f"- mxrun-master VmRSS: {rss[0][1] / 1024:.1f} MiB at the start, peak "
              f"{max(k for _, k in rss) / 1024:.1f} MiB, {rss[-1][1] / 1024:.1f} MiB at the end "
              f"({len(rss)} samples).")
    if status_after is not None:
        print(f"- The master's status at the end: failures {status_after.get('failures')}, "
              f"restarts spent {status_after.get('restarts_spent')}.")
    print(f"- Left behind: {'nothing' if not (left or scratch_left or mine) else 'see problems'} "
          f"(besides {len(hang_reports)} hang report folder(s), kept on purpose).")
    for p in problems:
        log.warn(p)
    print_problems(log.problems)
    state["failed"] = bool(log.problems)
    return 1 if log.problems else 0


def cleanup():
    for p in state["procs"]:
        if p.poll() is None:
            kill_tree(p.pid)
    if not state["workdir"]:
        return
    if state["failed"] or env("SOAK_KEEP", "0") == "1":
        # A failed soak keeps its consoles and metrics: the only record of what went wrong.
        print(f"soak.py: kept {state['workdir']}", file=sys.stderr)
    else:
        shutil.rmtree(state["workdir"], ignore_errors=True)


if __name__ == "__main__":
    run_main(main, cleanup)
