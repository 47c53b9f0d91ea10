#!/usr/bin/env bash
# The rendezvous master at scale: rdzv_loadgen --reform against a fresh mxrun-master for each N
# (default 1024, 4096, 16384 sessions from one process): round formation (first Join sent -> last
# round received), re-formation after one session vanishes (its stream cancelled -> every
# survivor's new round), the time to the job's end (every session reported success and was
# finished), and the master's peak RSS (VmHWM). Targets (issue 14): 16,384 in under 5 s for
# formation and re-formation, under 300 MiB.
#
# Environment: RUNS (default 3), NODES (default "1024 4096 16384"), MXRUN_MASTER, RDZV_LOADGEN
# (default <repo>/build/bin/...), PYTHON (default /usr/bin/python3).
# Prints a Markdown table of medians on stdout; progress on stderr. Every process it starts is
# stopped by pid.
set -euo pipefail

script_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo_root="$(cd "$script_dir/../.." && pwd)"
RUNS="${RUNS:-3}"
NODES="${NODES:-1024 4096 16384}"
MXRUN_MASTER="${MXRUN_MASTER:-$repo_root/build/bin/mxrun-master}"
RDZV_LOADGEN="${RDZV_LOADGEN:-$repo_root/build/bin/rdzv_loadgen}"
PYTHON="${PYTHON:-/usr/bin/python3}"
case "$RUNS" in ''|*[!0-9]*|0) echo "master_scale.sh: RUNS must be a positive integer" >&2; exit 2;; esac
for n in $NODES; do
  case "$n" in ''|*[!0-9]*|0) echo "master_scale.sh: NODES must be positive integers" >&2; exit 2;; esac
done
for b in "$MXRUN_MASTER" "$RDZV_LOADGEN"; do
  [ -x "$b" ] || { echo "master_scale.sh: not found or not executable: $b (build: cd build && ninja mxrun-master rdzv_loadgen)" >&2; exit 2; }
done
workdir="$(mktemp -d "${TMPDIR:-/tmp}/mxrun-scale.XXXXXX")"
trap 'rm -rf -- "$workdir"' EXIT
cp -- "$MXRUN_MASTER" "$workdir/mxrun-master"  # private copies: a rebuild cannot swap them
cp -- "$RDZV_LOADGEN" "$workdir/rdzv_loadgen"

echo "## The rendezvous master at scale"
echo
echo "- command: \`RUNS=$RUNS NODES=\"$NODES\" $0\`"
echo "- date: $(date -u '+%Y-%m-%d %H:%M:%S UTC'); nproc=$(nproc); repo at $(git -C "$repo_root" rev-parse --short HEAD 2>/dev/null || echo unknown)"
echo "- master: \`$MXRUN_MASTER\` (sha256 $(sha256sum "$workdir/mxrun-master" | cut -c1-12)...)"
echo "- load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
echo

"$PYTHON" - "$workdir" "$RUNS" "$NODES" <<'PY'
import os, re, signal, statistics, subprocess, sys, time

work, runs, nodes = sys.argv[1], int(sys.argv[2]), [int(n) for n in sys.argv[3].split()]
master_bin = os.path.join(work, "mxrun-master")
loadgen_bin = os.path.join(work, "rdzv_loadgen")
problems = []


def vm_hwm(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        return None


def one(n, idx):
    out_path = os.path.join(work, f"master_{n}_{idx}.out")
    with open(out_path, "wb") as out:
        master = subprocess.Popen([master_bin, "--port=0"], stdin=subprocess.DEVNULL, stdout=out,
                                  stderr=subprocess.STDOUT)
    try:
        port, deadline = None, time.monotonic() + 30
        while port is None and time.monotonic() < deadline and master.poll() is None:
            m = re.search(r"listening on 127\.0\.0\.1:(\d+)", open(out_path).read())
            port = int(m.group(1)) if m else None
            time.sleep(0.02)
        if port is None:
            problems.append(f"N={n} #{idx}: the master reported no port")
            return None
        lg = subprocess.run([loadgen_bin, f"--endpoint=127.0.0.1:{port}", f"--nodes={n}",
                             f"--run_id=scale{n}x{idx}", "--timeout=100", "--reform"],
                            capture_output=True, text=True, timeout=150)
        m = re.search(r"form_s=([0-9.]+) finish_s=([0-9.]+) rounds_ok=(\d+) finished=(-?\d+) "
                      r"reform_s=([0-9.]+) reformed=(\d+)", lg.stdout)
        if lg.returncode != 0 or not m or int(m.group(3)) != n or int(m.group(6)) != n - 1:
            problems.append(f"N={n} #{idx}: rdzv_loadgen exit {lg.returncode}: "
                            f"{(lg.stdout + lg.stderr).strip()[:300]}")
            return None
        return float(m.group(1)), float(m.group(5)), float(m.group(2)), vm_hwm(master.pid)
    finally:
        if master.poll() is None:
            os.kill(master.pid, signal.SIGTERM)
            try:
                master.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.kill(master.pid, signal.SIGKILL)
                master.wait()


rows = []
for n in nodes:
    results = []
    for idx in range(runs):
        r = one(n, idx)
        print(f"master_scale.sh: N={n} #{idx}: {r}", file=sys.stderr, flush=True)
        if r:
            results.append(r)
    rows.append((n, results))

print("| sessions | formation | re-formation after one loss | to the job's end | master peak RSS | runs (formation / re-formation, s) |")
print("|---:|---:|---:|---:|---:|---|")
for n, results in rows:
    if not results:
        print(f"| {n} | n/a | n/a | n/a | n/a | |")
        continue
    med = lambda i: statistics.median(r[i] for r in results)
    runs_text = ", ".join(f"{r[0]:.2f} / {r[1]:.2f}" for r in results)
    print(f"| {n} | {med(0):.2f} s | {med(1):.2f} s | {med(2):.2f} s | {med(3) / 1024:.0f} MiB | {runs_text} |")
print()
print("Each run: a fresh `mxrun-master --port=0`, then `rdzv_loadgen --endpoint=127.0.0.1:PORT "
      "--nodes=N --reform` (N sessions over 32 channels from one process, job --nnodes=N-1:N; "
      "once formed, session 0's stream is cancelled and every survivor joins again at once).")
if problems:
    print()
    print("Problems:")
    for p in problems:
        print(f"- {p}")
PY
