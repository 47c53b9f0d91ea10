#!/usr/bin/env python3
"""The workers' store at scale (issue 57, item 4): N simulated ranks against mxrun's store and
against PyTorch's own TCPStore server (libuv, the default since 2.4), side by side in one run.

Each run starts one server alone, then build/bin/store_loadgen plays N ranks on connections of
their own doing what init_process_group with a store-based barrier does (VALIDATE, PING, ADD
init/, SET the rank's address, ADD the barrier counter, the last one SETs the barrier key, every
rank WAITs for it; store_loadgen.cc says how). Reported per server and N: the barrier's time
(first connect to the last rank released) and the connect phase, medians over RUNS, and the
memory the load added to the server (its VmHWM after the run less its VmRSS before: PyTorch's
server lives in a Python that imported torch, so its whole RSS is no measure of the store), and
the CPU time the server spent under the load (user + system, every thread, from /proc/pid/stat):
on one machine the barrier's wall time is mostly the kernel's TCP handshakes, shared by both
servers, while the CPU time is the store's own cost, what a cluster's store host pays per job
start. The servers alternate run by run.

  mxrun     build/bin/store_serve: common/store/store_server.h alone
  pytorch   torch.distributed.TCPStore(is_master=True, use_libuv=True) in a Python of its own

Environment: RUNS (default 3), RANKS (default 1024,4096,16384), MXRUN_BUILD (default
<repo>/build), CONNECTING (connections being set up at once, default 512), LOAD_THREADS (the
load generator's threads, default 1; its CPU time is reported: one thread's is about the barrier
at 16,384 ranks), PIN=1 (the server on CPU 0 and the load generator on the other CPUs, so that the
load does not take the server's core: on a many-core machine, with LOAD_THREADS, the nearest this
gets to ranks on other hosts), SERVERS (default mxrun,pytorch; one of them alone where the other
cannot run).
Both servers and the load generator get the hard open-file limit. Markdown on stdout, progress on stderr.

PyTorch's server looks up each peer's name (getnameinfo) on its server thread as it accepts it; a
peer at ::ffff:127.0.0.1 is not in /etc/hosts, so that is a DNS query. Where the DNS server drops
some queries (this machine's: a 5 s resolver time-out every few dozen connections) that, not the
store, is what gets measured. PYTORCH_DNS=instant (the default) runs PyTorch's server in a mount
namespace of its own whose /etc/resolv.conf names no server, so every lookup fails at once and
PyTorch gets its best case (root and unshare needed); PYTORCH_DNS=system leaves the machine's.
mxrun's store looks nothing up.
"""
import json
import os
import resource
import subprocess
import sys
import tempfile

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_common import (REPO, Log, detect_env, die, env, executable, machine,  # noqa: E402
                          median, run_main, status_kib, torch_version, utc_now, git_rev)

SCRIPT = "store_scale.sh"
PYTORCH_SERVER = r'''
import datetime, resource, sys
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
import torch.distributed as dist
store = dist.TCPStore("127.0.0.1", 0, is_master=True, use_libuv=True, wait_for_workers=False,
                      timeout=datetime.timedelta(seconds=600))
print("port", store.port, flush=True)
sys.stdin.read()
'''


def cpu_seconds(pid):
    """(user, system) CPU seconds of every thread of `pid` (/proc/pid/stat); None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        tick = os.sysconf("SC_CLK_TCK")
        return int(fields[11]) / tick, int(fields[12]) / tick
    except (OSError, ValueError, IndexError):
        return None


def start(name, argv):
    """Starts server `name` (argv); its port. Its standard error is kept for a failed start only:
    under the load nothing may write to a pipe nobody reads."""
    with tempfile.TemporaryFile(mode="w+") as said:
        server = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=said, text=True)
        line = server.stdout.readline()
        if not line.startswith("port "):
            server.kill()
            server.wait()
            said.seek(0)
            die(SCRIPT, f"the {name} server did not say its port (said {line!r}; its last error "
                        f"lines: {said.read()[-600:]!r}; command: "
                        f"{' '.join(a if chr(10) not in a else '<script>' for a in argv)})")
    return server, int(line.split()[1])


def main():
    log = Log(SCRIPT)
    runs = int(env("RUNS", "3"))
    sizes = [int(n) for n in env("RANKS", "1024,4096,16384").split(",")]
    build = env("MXRUN_BUILD", os.path.join(REPO, "build"))
    connecting = env("CONNECTING", "512")
    load_threads = env("LOAD_THREADS", "1")
    if not load_threads.isdigit() or not 1 <= int(load_threads) <= 256:
        die(SCRIPT, f"LOAD_THREADS={load_threads}: accepted: 1 to 256")
    loadgen = os.path.join(build, "bin", "store_loadgen")
    serve = os.path.join(build, "bin", "store_serve")
    for path in (loadgen, serve):
        if not executable(path):
            die(SCRIPT, f"not built: {path} (scripts/build.sh)")
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))  # inherited by the three processes
    if hard < max(sizes) + 256:
        die(SCRIPT, f"the open-file hard limit ({hard}) is below {max(sizes)} ranks")
    pytorch = [sys.executable, "-c", PYTORCH_SERVER]
    chosen = env("SERVERS", "mxrun,pytorch").split(",")
    if any(name not in ("mxrun", "pytorch") for name in chosen):
        die(SCRIPT, f"SERVERS={','.join(chosen)}: accepted: mxrun, pytorch, or both")
    dns = env("PYTORCH_DNS", "instant")
    if dns not in ("instant", "system"):
        die(SCRIPT, f"PYTORCH_DNS={dns}: accepted: instant, system")
    if dns == "instant" and "pytorch" in chosen:
        if os.geteuid() != 0 or not executable("/usr/bin/unshare"):
            die(SCRIPT, "PYTORCH_DNS=instant needs root and unshare; or give PYTORCH_DNS=system")
        no_dns = os.path.join(build, "store_scale.resolv.conf")
        with open(no_dns, "w") as f:
            f.write("# no nameserver: a lookup fails at once (store_scale.py)\noptions attempts:1\n")
        pytorch = ["unshare", "-m", "--propagation", "private", "sh", "-c",
                   'mount --bind "$0" /etc/resolv.conf && exec "$@"', no_dns] + pytorch
    pin = env("PIN", "0")
    if pin not in ("0", "1"):
        die(SCRIPT, f"PIN={pin}: accepted: 0, 1")
    server_cpu, load_cpu = ([], [])
    if pin == "1":
        if (os.cpu_count() or 1) < 2 or not executable("/usr/bin/taskset"):
            die(SCRIPT, "PIN=1 needs two CPUs and taskset")
        last = (os.cpu_count() or 2) - 1
        server_cpu, load_cpu = (["taskset", "-c", "0"], ["taskset", "-c", f"1-{last}"])
    servers = {name: server_cpu + argv for name, argv in
               (("mxrun", [serve]), ("pytorch", pytorch)) if name in chosen}
    results = {(s, n): [] for s in servers for n in sizes}
    for n in sizes:
        for run in range(runs):
            order = list(servers) if run % 2 == 0 else list(reversed(servers))
            for name in order:
                server, port = start(name, servers[name])
                before = status_kib(server.pid, "VmRSS") or 0
                cpu_before = cpu_seconds(server.pid)
                # The load generator's CPU time (it is the only child reaped meanwhile): on one
                # machine its side of every connection competes with the server for the cores.
                load_before = resource.getrusage(resource.RUSAGE_CHILDREN)
                try:
                    r = subprocess.run(load_cpu + [loadgen, "--port", str(port), "--ranks", str(n),
                                        "--connecting", connecting, "--threads", load_threads],
                                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                       timeout=600)
                    load_after = resource.getrusage(resource.RUSAGE_CHILDREN)
                    peak = status_kib(server.pid, "VmHWM")
                    cpu_after = cpu_seconds(server.pid)
                finally:
                    server.stdin.close()
                    try:
                        server.wait(timeout=30)
                    except subprocess.TimeoutExpired:
                        server.kill()
                        server.wait()
                try:
                    record = json.loads(r.stdout.strip().splitlines()[-1])
                except (ValueError, IndexError):
                    log.warn(f"{name} at {n}: no result ({r.stderr[-300:]})")
                    continue
                if r.returncode != 0:
                    log.warn(f"{name} at {n}: {record['failed']} failed, "
                             f"{record['unfinished']} unfinished")
                    continue
                record["peak_kib"] = peak
                record["growth_kib"] = (peak or 0) - before
                record["cpu_s"] = record["user_s"] = None
                if None not in (cpu_before, cpu_after):
                    record["user_s"] = cpu_after[0] - cpu_before[0]
                    record["cpu_s"] = record["user_s"] + cpu_after[1] - cpu_before[1]
                record["load_cpu_s"] = (load_after.ru_utime - load_before.ru_utime +
                                        load_after.ru_stime - load_before.ru_stime)
                results[(name, n)].append(record)
                cpu = ("unknown" if record["cpu_s"] is None else
                       f"{record['cpu_s']:.2f} s (user {record['user_s']:.2f} s)")
                log.progress(f"{n} ranks, {name}: barrier {record['barrier_s']:.3f} s, "
                             f"connected {record['connected_s']:.3f} s, server CPU {cpu}, "
                             f"peak {peak} KiB, +{record['growth_kib']} KiB under the load, "
                             f"load generator CPU {record['load_cpu_s']:.2f} s")
    lookups = ("failing at once (PYTORCH_DNS=instant)" if dns == "instant"
               else "this machine's DNS (PYTORCH_DNS=system)")
    info = detect_env(os.path.join(REPO, ".venv/bin/torchrun"), sys.executable)
    print(f"# The workers' store at scale, {utc_now()}")
    print()
    settings = ("PIN=1 " if pin == "1" else "") + (
        f"LOAD_THREADS={load_threads} " if load_threads != "1" else "") + (
        f"SERVERS={','.join(chosen)} " if len(servers) == 1 else "")
    print(f"- command: `{settings}RUNS={runs} RANKS={','.join(map(str, sizes))} "
          f"scripts/bench/{SCRIPT}`; "
          f"git {git_rev()}, torch {torch_version(sys.executable)} (its libuv TCPStore server); "
          f"{machine(info.cpu_model)}; {connecting} connections set up at once by {load_threads} load "
          f"generator thread(s); PyTorch's "
          f"reverse lookups: {lookups}"
          + ("; the server pinned to CPU 0, the load generator to the others" if pin == "1"
             else ""))
    print()
    print("| ranks | server | barrier, median (min-max) | all connected, median | "
          "memory the load added (peak RSS) | server CPU time (of it user), median | load "
          "generator CPU, median | PyTorch / mxrun: barrier, CPU, user CPU | runs |")
    print("|---|---|---|---|---|---|---|---|---|")
    for n in sizes:
        mine = results.get(("mxrun", n), [])
        ours = [r["barrier_s"] for r in mine]
        our_cpu = [r["cpu_s"] for r in mine if r["cpu_s"] is not None]
        our_user = [r["user_s"] for r in mine if r["user_s"] is not None]
        for name in servers:
            got = results[(name, n)]
            if not got:
                print(f"| {n} | {name} | no run finished | - | - | - | - | - | 0 |")
                continue
            barrier = [r["barrier_s"] for r in got]
            connected = [r["connected_s"] for r in got]
            peak = max(r["peak_kib"] for r in got)
            growth = max(r["growth_kib"] for r in got)
            cpu = [r["cpu_s"] for r in got if r["cpu_s"] is not None]
            user = [r["user_s"] for r in got if r["user_s"] is not None]
            ratio = (f"{median(barrier) / median(ours):.1f}x" if name == "pytorch" and ours
                     else "")
            if name == "pytorch" and cpu and our_cpu and median(our_cpu) > 0:
                ratio += f", {median(cpu) / median(our_cpu):.1f}x"
            if name == "pytorch" and user and our_user and median(our_user) > 0:
                ratio += f", {median(user) / median(our_user):.1f}x"
            cpu_cell = f"{median(cpu):.2f} s ({median(user):.2f} s)" if cpu else "-"
            load_cell = f"{median([r['load_cpu_s'] for r in got]):.2f} s"
            print(f"| {n} | {name} | {median(barrier):.3f} s ({min(barrier):.3f}-{max(barrier):.3f})"
                  f" | {median(connected):.3f} s | {growth / 1024:.1f} MiB ({peak / 1024:.1f} MiB) |"
                  f" {cpu_cell} | {load_cell} | {ratio} | {len(got)} |")
    for problem in log.problems:
        print(f"\n- problem: {problem}")
    return 0


if __name__ == "__main__":
    run_main(main)
