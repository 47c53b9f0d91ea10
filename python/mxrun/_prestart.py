"""A pre-started interpreter for an ordinary script (`mxrun --prestart`):

    python -u -m mxrun._prestart SCRIPT [ARGS...]
    python -u -m mxrun._prestart -m MODULE [ARGS...]

The agent starts one per local rank as a standby (MXRUN_STANDBY=1, no rank yet) while the group
trains. It imports PRE_IMPORTS (torch, torch.distributed and torch._dynamo, which
DistributedDataParallel's constructor imports: a second of a restart) and the modules named in
MXRUN_PRESTART_IMPORTS, comma-separated, says hello as a spare that can take a rank, and waits. When the group restarts,
the agent promotes it with a round notice carrying the rank's whole torchrun contract: it takes
that environment, says it is an ordinary worker from now on (a second hello without
in_process_restart: the next failure stops it like any worker), and runs the script as
`python -u SCRIPT` would (`__main__`, sys.argv, the script's folder first on sys.path). What a
restart saves is the interpreter's start and those imports.

Safe because nothing a round gives a worker is read when torch is imported. The agent gives a
standby the node's environment without the per-rank variables (OMP_NUM_THREADS as its workers get
it), and the notice adds only the torchrun contract and mxrun's own variables (ROUND_ONLY below).
A traced import of PRE_IMPORTS (PyTorch 2.13 CPU and 2.14 CUDA: every getenv of the process and
every os.environ read, tests/python/test_prestart.py) reads none of them: it reads
OMP_*, MKL_*, GOMP_*, KMP_*, OPENBLAS_*, TORCH_LOGS, TORCH_CPP_LOG_LEVEL, PYTORCH_JIT and the
like, which are the same for a standby and its worker. CUDA reads CUDA_VISIBLE_DEVICES when it
initializes, which a standby never does. Should a notice change any other variable, the
interpreter is not reused: it execs a fresh one with the round's environment, as an ordinary
start would. So it does when a module imported ahead read, by name, a variable a round sets
(`_env_reads`: MXRUN_PRESTART_IMPORTS=lightning keeps `RANK` at import), and it says so as soon
as the standby has imported them, and again when it would have taken the rank.

Without mxrun (no control channel, or not a standby) it runs the script at once, so the command
works anywhere.
"""
import importlib
import os
import runpy
import sys

from . import _channel, _env_reads, _flight_recorder, _rounds

# What every pre-started interpreter imports before it says it is ready. torch._dynamo is what
# DistributedDataParallel's constructor imports first (torch.nn.parallel.distributed asks
# torch._dynamo.utils.get_optimize_ddp_mode), with sympy and the inductor's settings: 1.0-1.2 s
# and 71 MiB with PyTorch 2.13 on this project's CPU machine, in every DDP, Lightning, Trainer and
# Accelerate restart. Those past the first two may be missing from a build: then skipped.
PRE_IMPORTS = ("torch", "torch.distributed", "torch._dynamo")
REQUIRED_IMPORTS = frozenset({"torch", "torch.distributed"})

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


def round_only(name):
    return name in ROUND_ONLY or name.startswith(ROUND_ONLY_PREFIXES)


def import_ahead(extra):
    """Imports PRE_IMPORTS and `extra`; returns "VARIABLE (by MODULE)" for each variable a round
    sets that the imported code read by name."""
    reads = set()
    with _env_reads.watched(reads):
        for name in PRE_IMPORTS + tuple(extra):
            try:
                importlib.import_module(name)
            except ImportError:
                if name in REQUIRED_IMPORTS or name in extra:
                    raise
    return sorted(f"{key} (by {module})" for key, module in reads if round_only(key))


def stale_after(before, after):
    """The variables a notice changed that the imported modules may have read (not ROUND_ONLY)."""
    return sorted(k for k in set(before) | set(after)
                  if before.get(k) != after.get(k) and not round_only(k))


def main(argv):
    if not argv:
        _usage()
    channel = _channel.shared()
    if channel is None or os.environ.get("MXRUN_STANDBY") != "1":
        if channel is not None:
            _flight_recorder.serve()
        _run_target(argv)
        return 0
    extra = [m.strip() for m in os.environ.get("MXRUN_PRESTART_IMPORTS", "").split(",")
             if m.strip()]
    read_ahead = import_ahead(extra)
    if read_ahead:
        print(f"mxrun: imported ahead, {', '.join(read_ahead)} read what only a rank's round sets: "
              "this interpreter will not be reused, a restarted rank starts afresh (drop that "
              "module from MXRUN_PRESTART_IMPORTS)", file=sys.stderr, flush=True)
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
    if stale or read_ahead:
        why = (f"the round set {', '.join(stale)}, which torch may have read at import" if stale
               else f"{', '.join(read_ahead)} was read while imported ahead")
        print(f"mxrun: {why}: starting a fresh interpreter", file=sys.stderr, flush=True)
        os.execv(sys.executable, [sys.executable, "-u", *argv])
    _flight_recorder.serve()  # the round named this rank's socket
    _run_target(argv)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
