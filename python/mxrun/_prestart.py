"""A pre-started interpreter for an ordinary script (`mxrun --prestart`):

    python -u -m mxrun._prestart SCRIPT [ARGS...]
    python -u -m mxrun._prestart -m MODULE [ARGS...]

The agent starts one per local rank as a standby (MXRUN_STANDBY=1, no rank yet) while the group
trains. It imports torch and torch.distributed (and the modules named in MXRUN_PRESTART_IMPORTS,
comma-separated), says hello as a spare that can take a rank, and waits. When the group restarts,
the agent promotes it with a round notice carrying the rank's whole torchrun contract: it takes
that environment, says it is an ordinary worker from now on (a second hello without
in_process_restart: the next failure stops it like any worker), and runs the script as
`python -u SCRIPT` would (`__main__`, sys.argv, the script's folder first on sys.path). What a
restart saves is the interpreter's start and torch's import.

Safe because nothing a round gives a worker is read when torch is imported. The agent gives a
standby the node's environment without the per-rank variables (OMP_NUM_THREADS as its workers get
it), and the notice adds only the torchrun contract and mxrun's own variables (ROUND_ONLY below).
A traced `import torch, torch.distributed` (PyTorch 2.13 CPU and 2.14 CUDA: every getenv of the
process and every os.environ read, tests/python/test_prestart.py) reads none of them: it reads
OMP_*, MKL_*, GOMP_*, KMP_*, OPENBLAS_*, TORCH_LOGS, TORCH_CPP_LOG_LEVEL, PYTORCH_JIT and the
like, which are the same for a standby and its worker. CUDA reads CUDA_VISIBLE_DEVICES when it
initializes, which a standby never does. Should a notice change any other variable, the
interpreter is not reused: it execs a fresh one with the round's environment, as an ordinary
start would.

Without mxrun (no control channel, or not a standby) it runs the script at once, so the command
works anywhere.
"""
import importlib
import os
import runpy
import sys

from . import _channel, _flight_recorder, _rounds

# What a round notice may set without making the pre-imported torch stale (none is read at import).
ROUND_ONLY = frozenset({
    "RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "GROUP_WORLD_SIZE",
    "ROLE_NAME", "ROLE_RANK", "ROLE_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
    "CUDA_VISIBLE_DEVICES", "NOTIFY_SOCKET", "WATCHDOG_PID", "WATCHDOG_USEC",
    "TORCH_NCCL_ASYNC_ERROR_HANDLING", "TORCH_NCCL_DEBUG_INFO_TEMP_FILE",
})
ROUND_ONLY_PREFIXES = ("TORCHELASTIC_", "MXRUN_")


def _usage():
    sys.exit("usage: python -m mxrun._prestart SCRIPT [ARGS...] | -m MODULE [ARGS...]")


def _read_line(fd):
    """One line from the channel, read unbuffered: nothing after it is taken from the socket."""
    data = b""
    while not data.endswith(b"\n"):
        chunk = os.read(fd, 1)
        if not chunk:
            return None  # the agent is gone: the job ended without needing this interpreter
        data += chunk
    return data.decode("utf-8", "replace")


def _run_target(argv):
    """Runs SCRIPT or -m MODULE with ARGS as the interpreter's main program."""
    if argv[0] == "-m":
        if len(argv) < 2:
            _usage()
        sys.argv = [argv[1], *argv[2:]]
        runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
    else:
        path = os.path.abspath(argv[0])
        sys.argv = [argv[0], *argv[1:]]
        sys.path[0] = os.path.dirname(path)  # as `python SCRIPT` puts the script's folder first
        runpy.run_path(path, run_name="__main__")


def stale_after(before, after):
    """The variables a notice changed that the imported modules may have read (not ROUND_ONLY)."""
    return sorted(k for k in set(before) | set(after)
                  if before.get(k) != after.get(k) and k not in ROUND_ONLY
                  and not k.startswith(ROUND_ONLY_PREFIXES))


def main(argv):
    if not argv:
        _usage()
    channel = _channel.shared()
    if channel is None or os.environ.get("MXRUN_STANDBY") != "1":
        if channel is not None:
            _flight_recorder.serve()
        _run_target(argv)
        return 0
    for name in ["torch", "torch.distributed"] + [
            m.strip() for m in os.environ.get("MXRUN_PRESTART_IMPORTS", "").split(",") if m.strip()]:
        importlib.import_module(name)
    channel.send('{"hello": 1, "in_process_restart": true}')  # ready to take a rank
    line = _read_line(channel.fileno())
    if line is None:
        return 0
    notice = _rounds.parse_notice(line)
    imported_with = dict(os.environ)
    os.environ.update(notice.env)
    os.environ.pop("MXRUN_STANDBY", None)
    channel.send('{"hello": 1, "in_process_restart": false}')  # an ordinary worker from now on
    stale = stale_after(imported_with, os.environ)
    if stale:
        print(f"mxrun: the round set {', '.join(stale)}, which torch may have read at import: "
              "starting a fresh interpreter", file=sys.stderr, flush=True)
        os.execv(sys.executable, [sys.executable, "-u", *argv])
    _flight_recorder.serve()  # the round named this rank's socket
    _run_target(argv)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
