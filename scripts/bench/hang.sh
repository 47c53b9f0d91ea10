#!/usr/bin/env bash
# Hang detection benchmark: from the moment a rank hangs to the group restarted, mxrun against
# torchrun, side by side on the same workers.
#
# Cases (2 or 3 workers on this machine, --max_restarts=1; the hang happens on attempt 0 only):
#   filetimer  PyTorch's own watchdog: scripts/examples/file_timer.py, rank 1 hangs inside
#              `timer.expires(after=T)`; TORCHELASTIC_ENABLE_FILE_TIMER=1. mxrun and torchrun.
#              Hang moment: the worker enters the timer. torchrun 2.13's FileTimerServer, after
#              killing the worker, kills the agent itself with the same signal (SIGKILL), which ends
#              the job instead of restarting it (file_based_local_timer.py); the table says so, and
#              once seen, torchrun's remaining runs of the case are skipped.
#   heartbeat  a shell worker touches $MXRUN_HEARTBEAT_FILE once, then hangs; --hang_timeout=T.
#              mxrun only: torchrun has no such rule (it would wait forever).
#              Hang moment: the worker's last beat.
#   barrier    3 shell workers, ranks 0 and 1 exit 0, rank 2 hangs; --exit_barrier_timeout=T.
#              mxrun; torchrun has no exit barrier for workers and is run once, bounded by
#              TORCHRUN_BOUND seconds, to show that it never restarts.
#              Hang moment: the first peer's exit.
# "Restarted" is the moment the last worker of attempt 1 has started (workers write their start
# time first thing, before importing anything heavy). Also reported: the time mxrun spent
# collecting diagnostics (its "hang diagnostics ... in S s" line).
#
# Prints a Markdown table of medians on stdout.
#
# Environment:
#   RUNS           measured runs per case and launcher (default 5)
#   TIMEOUT        T, the timer / heartbeat / barrier timeout in seconds (default 2)
#   TORCHRUN_BOUND seconds torchrun is left waiting in the barrier case (default 60)
#   MXRUN          mxrun binary (default <repo>/build/bin/mxrun)
#   TORCHRUN       torchrun (default <repo>/.venv/bin/torchrun: torchrun 2.13 from the project's venv)
#   PYTHON         python with PyTorch, for the workers and the driver (default <repo>/.venv/bin/python3)
#
# torchrun 2.13 gets the same flags as mxrun: its default --monitor_interval is already 0.1 s.
set -euo pipefail

script_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo_root="$(cd "$script_dir/../.." && pwd)"

RUNS="${RUNS:-5}"
TIMEOUT="${TIMEOUT:-2}"
TORCHRUN_BOUND="${TORCHRUN_BOUND:-60}"
MXRUN="${MXRUN:-$repo_root/build/bin/mxrun}"
TORCHRUN="${TORCHRUN:-$repo_root/.venv/bin/torchrun}"
PYTHON="${PYTHON:-$repo_root/.venv/bin/python3}"

case "$RUNS" in ''|*[!0-9]*|0) echo "hang.sh: RUNS must be a positive integer" >&2; exit 2;; esac
case "$TORCHRUN_BOUND" in ''|*[!0-9]*|0) echo "hang.sh: TORCHRUN_BOUND must be a positive integer" >&2; exit 2;; esac
"$PYTHON" -c "import sys; t = float(sys.argv[1]); sys.exit(0 if 0 < t <= 600 else 1)" "$TIMEOUT" 2>/dev/null ||
  { echo "hang.sh: TIMEOUT must be a number of seconds in (0, 600]" >&2; exit 2; }
[ -x "$MXRUN" ] || { echo "hang.sh: mxrun not found or not executable: $MXRUN (run scripts/build.sh)" >&2; exit 2; }
[ -x "$TORCHRUN" ] || { echo "hang.sh: torchrun not found: $TORCHRUN" >&2; exit 2; }
"$PYTHON" -c "import torch" 2>/dev/null || { echo "hang.sh: $PYTHON cannot import torch" >&2; exit 2; }

workdir="$(mktemp -d "${TMPDIR:-/tmp}/mxrun-bench.XXXXXX")"
cleanup() { rm -rf -- "$workdir"; }
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
mkdir "$workdir/bin"
cp -- "$MXRUN" "$workdir/bin/mxrun"

invocation="RUNS=$RUNS TIMEOUT=$TIMEOUT"
[ "$TORCHRUN_BOUND" != 60 ] && invocation+=" TORCHRUN_BOUND=$TORCHRUN_BOUND"
[ "$MXRUN" != "$repo_root/build/bin/mxrun" ] && invocation+=" MXRUN=$MXRUN"
[ "$TORCHRUN" != "$repo_root/.venv/bin/torchrun" ] && invocation+=" TORCHRUN=$TORCHRUN"
[ "$PYTHON" != "$repo_root/.venv/bin/python3" ] && invocation+=" PYTHON=$PYTHON"
invocation+=" $0"
# shellcheck source=scripts/bench/lib.sh
source "$script_dir/lib.sh"
bench_detect_env
echo "## mxrun vs torchrun: from a hang to the group restarted"
echo
echo "- command: \`$invocation\`"
echo "- date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
echo "- machine: nproc=$(nproc), uname -r=$(uname -r)${cpu_model:+, cpu=$cpu_model}"
echo "- mxrun: \`$MXRUN\` (repo at $git_rev); stack dumpers: eu-stack $(command -v eu-stack >/dev/null && echo yes || echo no), gdb $(command -v gdb >/dev/null && echo yes || echo no), py-spy $(command -v py-spy >/dev/null && echo yes || echo no)"
echo "- torchrun: \`$TORCHRUN\` (torch $("$torch_py" -c 'import torch; print(torch.__version__)' 2>/dev/null || echo unknown))"
echo "- runs: $RUNS per case and launcher, the launchers interleaved; figures are medians; T = $TIMEOUT s"
echo

export BENCH_RUNS="$RUNS" BENCH_TIMEOUT="$TIMEOUT" BENCH_BOUND="$TORCHRUN_BOUND" \
       BENCH_MXRUN="$workdir/bin/mxrun" BENCH_TORCHRUN="$TORCHRUN" BENCH_WORKDIR="$workdir" \
       BENCH_PYTHON="$PYTHON" BENCH_EXAMPLE="$repo_root/scripts/examples/file_timer.py"

"$PYTHON" - "$script_dir" <<'PY'
import os, re, signal, subprocess, sys, time

sys.dont_write_bytecode = True
sys.path.insert(0, sys.argv[1])
from bench_common import Log, kill_marked, kill_tree, median, print_problems

RUNS = int(os.environ["BENCH_RUNS"])
T = float(os.environ["BENCH_TIMEOUT"])
BOUND = float(os.environ["BENCH_BOUND"])
MXRUN = os.environ["BENCH_MXRUN"]
TORCHRUN = os.environ["BENCH_TORCHRUN"]
WORK = os.environ["BENCH_WORKDIR"]
PYTHON = os.environ["BENCH_PYTHON"]
EXAMPLE = os.environ["BENCH_EXAMPLE"]
RUN_LIMIT = 120.0

log = Log("hang.sh")

# A shell worker writing the same events as file_timer.py: "<event> <rank> <attempt> <time>".
SHELL_EVENT = 'ev() { echo "$1 $RANK $TORCHELASTIC_RESTART_COUNT $(date +%s.%N)" >> "$EVENTS"; }'
HEARTBEAT_WORKER = SHELL_EVENT + '''
ev start
if [ "$RANK" = 1 ] && [ "$TORCHELASTIC_RESTART_COUNT" = 0 ]; then
  touch "$MXRUN_HEARTBEAT_FILE"; ev hang; exec sleep 3600
fi
sleep 0.3; ev done'''
BARRIER_WORKER = SHELL_EVENT + '''
ev start
if [ "$RANK" = 2 ] && [ "$TORCHELASTIC_RESTART_COUNT" = 0 ]; then exec sleep 3600; fi
ev done'''


run_count = 0


def run(cmd, env_extra, events, limit):
    """Runs a launcher in its own process group; kills it and its workers past `limit`. Returns
    (exit code or None when killed, stderr, events as tuples). Whatever the run left behind (a
    worker of a launcher that died first: torchrun 2.x gives every worker a session of its own)
    is found by the marker in its environment and killed when the run ends."""
    global run_count
    run_count += 1
    marker = f"{WORK}/run{run_count}"
    env = dict(os.environ, EVENTS=events, PYTHON_EXEC=PYTHON, TMPDIR=WORK, BENCH_HANG_RUN=marker,
               **env_extra)
    with open(os.path.join(WORK, "stderr"), "w+") as err:
        p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err,
                             cwd=WORK, env=env, start_new_session=True)
        try:
            rc = p.wait(timeout=limit)
        except subprocess.TimeoutExpired:
            kill_tree(p.pid)
            p.wait()
            rc = None
        kill_marked("BENCH_HANG_RUN=" + marker)
        err.seek(0)
        text = err.read()
    rows = []
    if os.path.exists(events):
        with open(events) as f:
            for line in f:
                parts = line.split()
                if len(parts) == 4:
                    rows.append((parts[0], int(parts[1]), int(parts[2]), float(parts[3])))
        os.unlink(events)
    return rc, text, rows


def recovery(rows, hang_event, workers):
    """Seconds from the hang moment to the last start of attempt 1; None when it never came."""
    hang = [t for (e, r, a, t) in rows if e == hang_event and a == 0]
    starts = [t for (e, r, a, t) in rows if e == "start" and a == 1]
    if not hang or len(starts) < workers:
        return None
    return max(starts) - min(hang)


def diagnostics_seconds(stderr):
    m = re.search(r"hang diagnostics of rank [0-9, ]+ written to \S+ in ([0-9.]+) s", stderr)
    return float(m.group(1)) if m else None


CASES = {
    "filetimer": dict(
        workers=2, hang_event="hang", env={"TORCHELASTIC_ENABLE_FILE_TIMER": "1"},
        mxrun=[MXRUN, "--nproc_per_node=2", "--max_restarts=1", EXAMPLE, "--hang_rank", "1",
               "--expire_after", str(T), "--events", "{events}"],
        torchrun=[TORCHRUN, "--nproc_per_node=2", "--max_restarts=1", EXAMPLE,
                  "--hang_rank", "1", "--expire_after", str(T), "--events", "{events}"]),
    "heartbeat": dict(
        workers=2, hang_event="hang", env={},
        mxrun=[MXRUN, "--nproc_per_node=2", "--max_restarts=1", f"--hang_timeout={T}",
               "--no_python", "/bin/sh", "-c", HEARTBEAT_WORKER],
        torchrun=None),
    "barrier": dict(
        workers=3, hang_event="done", env={},
        mxrun=[MXRUN, "--nproc_per_node=3", "--max_restarts=1", f"--exit_barrier_timeout={T}",
               "--no_python", "/bin/sh", "-c", BARRIER_WORKER],
        torchrun=[TORCHRUN, "--nproc_per_node=3", "--max_restarts=1",
                  "--no_python", "/bin/sh", "-c", BARRIER_WORKER]),
}

results = {}   # (case, launcher) -> {"recovery": [...], "diag": [...], "note": str}
for case, spec in CASES.items():
    for launcher in ("mxrun", "torchrun"):
        results[(case, launcher)] = {"recovery": [], "diag": [], "note": ""}
    for i in range(RUNS):
        for launcher in ("mxrun", "torchrun"):
            cmd = spec[launcher]
            if cmd is None:
                continue
            if case == "barrier" and launcher == "torchrun" and i > 0:
                continue   # once is enough to show it never restarts
            if results[(case, launcher)].get("final"):
                continue   # the same end again would tell nothing new
            events = os.path.join(WORK, "events")
            cmd = [c.replace("{events}", events) for c in cmd]
            limit = BOUND if (case == "barrier" and launcher == "torchrun") else RUN_LIMIT
            log.progress(f"{case} {launcher} run {i + 1}")
            t0 = time.time()
            rc, stderr, rows = run(cmd, spec["env"], events, limit)
            r = recovery(rows, spec["hang_event"], spec["workers"])
            entry = results[(case, launcher)]
            if r is None:
                hung = any(e == spec["hang_event"] and a == 0 for (e, _, a, _) in rows)
                if (case == "filetimer" and launcher == "torchrun" and hung
                        and rc == -signal.SIGKILL):
                    # torch 2.x: the FileTimerServer reaps the worker, then SIGKILLs its own agent.
                    entry["note"] = ("no restart: the expired timer's SIGKILL went to the worker and "
                                     "then to torchrun itself (its FileTimerServer), ending the job")
                    entry["final"] = True
                elif rc is None:
                    entry["note"] = (f"never restarted: still waiting after {time.time() - t0:.0f} s"
                                     f" (killed at the bound)")
                else:
                    log.warn(f"{case} {launcher}: no restart seen (exit code {rc})\n"
                             + stderr[-1500:])
                continue
            if rc != 0:
                log.warn(f"{case} {launcher}: exit code {rc} after the restart")
            entry["recovery"].append(r)
            d = diagnostics_seconds(stderr)
            if d is not None:
                entry["diag"].append(d)

print("| case | launcher | hang → group restarted | min–max | over the timeout T | diagnostics collected in |")
print("|---|---|---|---|---|---|")
for case in CASES:
    for launcher in ("mxrun", "torchrun"):
        entry = results[(case, launcher)]
        if CASES[case][launcher] is None:
            print(f"| {case} | {launcher} | no such rule | | | |")
            continue
        if not entry["recovery"]:
            print(f"| {case} | {launcher} | {entry['note'] or 'no restart seen'} | | | |")
            continue
        rec = median(entry["recovery"])
        diag = f"{median(entry['diag']):.2f} s" if entry["diag"] else "-"
        spread = f"{min(entry['recovery']):.2f}–{max(entry['recovery']):.2f} s"
        print(f"| {case} | {launcher} | {rec:.2f} s (n={len(entry['recovery'])}) | {spread} | "
              f"{rec - T:+.2f} s | {diag} |")
print_problems(log.problems)
PY
