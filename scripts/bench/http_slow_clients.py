"""Slow clients against three HTTP servers of the same page (issue 39, item 1): mxrun's own
(common/http/http_server, built as build/bin/http_server_ours), cpp-httplib 0.11 and civetweb
1.15 (Debian 12's packages, each with its defaults, built here with g++ from
scripts/bench/http_servers/). For each: the median time of SCRAPES (default 5) scrapes of
/metrics alone, then while HOLD_CLIENTS (default 64) clients hold the port, first idle (connected,
sending nothing), then slow (a byte of a request head a second; one the server closes connects
again at once, as an attacker would). A scrape that takes more than 20 s counts as 20 s (given
up). Also the server's RSS while held and the size of each stripped minimal server.

    scripts/bench/http_slow_clients.sh > http.md
"""
import os, shutil, socket, subprocess, sys, threading, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_common import (Log, REPO, die, env, free_port, git_rev, machine, make_workdir,  # noqa: E402
                          median, run_main, signal_pid, status_kib, utc_now)

SCRIPT = "http_slow_clients.py"
GIVE_UP = 20.0
log = Log(SCRIPT)
state = {"procs": [], "workdir": None}
HERE = os.path.dirname(os.path.abspath(__file__))


def build(wd):
    """The three servers: name -> (argv builder, binary)."""
    ours = os.path.join(env("MXRUN_BIN_DIR", os.path.join(REPO, "build/bin")), "http_server_ours")
    if not os.access(ours, os.X_OK):
        die(SCRIPT, f"{ours} not found (build first: scripts/build.sh)")
    servers = {"mxrun http_server": (lambda port: [ours], ours)}
    httplib = subprocess.run(["pkg-config", "--cflags", "--libs", "cpp-httplib"],
                             capture_output=True, text=True).stdout.split()
    for name, source, libs in (("cpp-httplib 0.11", "httplib.cc", httplib + ["-pthread"]),
                               ("civetweb 1.15", "civetweb.cc", ["-lcivetweb"])):
        binary = os.path.join(wd, source[:-3])
        cmd = ["g++", "-std=c++20", "-O2", os.path.join(HERE, "http_servers", source), "-o", binary] + libs
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            die(SCRIPT, f"cannot build {source} (scripts/install-deps.sh installs "
                        f"libcpp-httplib-dev and libcivetweb-dev): {r.stderr[-2000:]}")
        if name.startswith("civetweb"):
            servers[name] = (lambda port, b=binary: [b, str(port)], binary)
        else:
            servers[name] = (lambda port, b=binary: [b], binary)
    return servers


def stripped_size(binary, wd):
    copy = os.path.join(wd, "stripped")
    shutil.copy(binary, copy)
    subprocess.run(["strip", copy], check=True)
    size = os.path.getsize(copy)
    os.unlink(copy)
    return size


def size_with_library(binary, wd):
    """The stripped server, plus the HTTP library's shared object where it links one (Debian's
    cpp-httplib and civetweb); mxrun's server is linked in statically."""
    size = stripped_size(binary, wd)
    for line in subprocess.run(["ldd", binary], capture_output=True, text=True).stdout.splitlines():
        if ("httplib" in line or "civetweb" in line) and "=>" in line:
            size += stripped_size(os.path.realpath(line.split("=>")[1].split()[0]), wd)
    return size


def start(argv):
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
    state["procs"].append(p)
    line = p.stdout.readline()
    if not line.startswith("port "):
        raise RuntimeError(f"{argv[0]} did not start: {line!r}")
    return p, int(line.split()[1])


def scrape(port):
    """Seconds until the whole page came back (GIVE_UP at most)."""
    t0 = time.monotonic()
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=GIVE_UP) as s:
            s.sendall(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
            data = b""
            while True:
                left = GIVE_UP - (time.monotonic() - t0)
                if left <= 0:
                    return GIVE_UP
                s.settimeout(left)
                chunk = s.recv(65536)
                if not chunk:
                    break
                data += chunk
        if b" 200 " not in data.split(b"\r\n", 1)[0] or len(data) < 20 * 1024:
            return GIVE_UP
    except OSError:
        return GIVE_UP
    return min(GIVE_UP, time.monotonic() - t0)


class Holders:
    """`count` connections that send nothing (slow=False) or a byte a second (slow=True)."""
    HEAD = b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Slow: "

    def __init__(self, port, count, slow):
        self.port, self.slow, self.stop = port, slow, False
        self.socks = [self.connect() for _ in range(count)]
        self.reopened = 0
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def connect(self):
        try:
            return socket.create_connection(("127.0.0.1", self.port), timeout=1)
        except OSError:
            return None

    def run(self):
        sent = 0
        while not self.stop:
            if self.slow:
                for i, s in enumerate(self.socks):
                    try:
                        if s is None:
                            raise OSError
                        s.send(self.HEAD[sent % len(self.HEAD):][:1] or b"x")
                    except OSError:
                        if s is not None:
                            s.close()
                        self.socks[i] = self.connect()
                        self.reopened += 1
                sent += 1
            for _ in range(20):
                if self.stop:
                    break
                time.sleep(0.05)

    def close(self):
        self.stop = True
        self.thread.join()
        for s in self.socks:
            if s is not None:
                s.close()


def measure(argv_of, scrapes, holders):
    port = free_port()
    p, port = start(argv_of(port))
    time.sleep(0.2)
    rss_idle = status_kib(p.pid, "VmRSS")
    alone = [scrape(port) for _ in range(scrapes)]
    rows = {"alone": (median(alone), max(alone), None, alone.count(GIVE_UP))}
    for kind in ("idle", "slow"):
        log.progress(f"{argv_of(port)[0]}: {holders} {kind} clients")
        h = Holders(port, holders, slow=(kind == "slow"))
        time.sleep(1.5)
        times = [scrape(port) for _ in range(scrapes)]
        rss = status_kib(p.pid, "VmRSS")
        h.close()
        rows[kind] = (median(times), max(times), rss, times.count(GIVE_UP))
        time.sleep(2.5)  # the server lets the closed ones go before the next phase
    p.terminate()
    try:
        p.wait(10)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
    return rows, rss_idle


def main():
    scrapes = int(env("SCRAPES", "5"))
    holders = int(env("HOLD_CLIENTS", "64"))
    wd = make_workdir("mxrun-http-bench-")
    state["workdir"] = wd
    servers = build(wd)
    print(f"## HTTP servers against slow clients\n\n`scripts/bench/http_slow_clients.sh` on "
          f"{utc_now()}, git {git_rev()}, {machine()}. The same 20 KiB page, {scrapes} scrapes "
          f"each (median / slowest; a scrape given up after {GIVE_UP:.0f} s counts {GIVE_UP:.0f} s), "
          f"alone and while {holders} clients hold the port.\n")
    print("| server | alone | {0} idle clients | {0} slow clients | RSS idle | RSS held (slow) "
          "| stripped size with its library |".format(holders))
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, (argv_of, binary) in servers.items():
        rows, rss_idle = measure(argv_of, scrapes, holders)
        seconds = lambda x: f"{x * 1000:.1f} ms" if x < 1 else f"{x:.1f} s"
        cell = lambda r: f"{seconds(r[0])} / {seconds(r[1])}" + (f", {r[3]} given up" if r[3] else "")
        print(f"| {name} | {cell(rows['alone'])} | {cell(rows['idle'])} | {cell(rows['slow'])} | "
              f"{rss_idle / 1024:.1f} MiB | {rows['slow'][2] / 1024:.1f} MiB | "
              f"{size_with_library(binary, wd) / 1024:.0f} KiB |", flush=True)
    return 0


def cleanup():
    for p in state["procs"]:
        signal_pid(p.pid)
        try:
            p.wait(5)
        except subprocess.TimeoutExpired:
            pass
    if state["workdir"]:
        shutil.rmtree(state["workdir"], ignore_errors=True)


if __name__ == "__main__":
    run_main(main, cleanup)
