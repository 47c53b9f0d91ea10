"""PyTorch's flight recorder, handed to mxrun's agent when it asks (a hang, a collective failure).

mxrun turns the recorder on (TORCH_FR_BUFFER_SIZE, unless the user set it) and names a socket per
rank in MXRUN_FLIGHT_SOCKET. The first `mxrun.step_done` (or `mxrun.run`, or a --prestart
interpreter) starts one daemon thread listening there. The agent connects, writes the request line
`fr_trace`, and reads back `ok <N>` and N bytes of JSON (or `error <why>`): the recorder's dump
(`torch._C._distributed_c10d._dump_fr_trace`, with each collective's Python stack), its group
table filled in from torch.distributed's own (PyTorch 2.13's Gloo backend leaves it empty, which
breaks the analyzer), and this rank's identity.

Why a thread of ours rather than PyTorch's `_WorkerServer` (TORCH_WORKER_SERVER_SOCKET): that one
serves only the JSON dump, which has no stacks and the empty group table, and it logs three
c10d warnings per worker on every run. A thread needs the GIL, which a collective's wait
releases; a worker stuck holding the GIL does not answer, and the agent says so.

A worker that dies of a collective's exception (PyTorch gave up on it: a Gloo timeout, NCCL's
watchdog, an NCCL error; the words are agent/hang/collective_failure.cc's) writes its dump at exit
to MXRUN_FLIGHT_SOCKET + ".exit.json", where the agent finds it: the rank that raised is otherwise
the one whose record is missing. Any other exception exits at once: a first dump takes 2-5 s
(PyTorch 2.13 imports torch._dynamo, 823 modules, on its way to the recorded stacks), which would
delay every restart.

Nothing happens without the variable (torchrun, no launcher), and a bad one is ignored: the
recorder's dumps are diagnostics, never a reason for a script to fail.
"""
import atexit
import json
import os
import pickle
import socket
import sys
import threading

VARIABLE = "MXRUN_FLIGHT_SOCKET"
REQUEST = b"fr_trace\n"
EXIT_SUFFIX = ".exit.json"  # the dump a worker dying of an exception leaves beside its socket
_MAX_REQUEST = 64  # bytes: a request is one short line
# What makes an exception a collective's (as agent/hang/collective_failure.cc reads a failure).
COLLECTIVE_SIGNS = ("Watchdog caught collective operation timeout", "Timed out waiting",
                    "NCCL error", "ncclInternalError", "ncclSystemError", "ncclRemoteError",
                    "ncclUnhandledCudaError", "ncclInvalidUsage", "DistBackendError")

_serving = {}  # pid -> the listening socket (or None when it could not be made)


def serve(environ=None):
    """Starts answering the agent's dump requests, once per process; returns True when serving."""
    environ = os.environ if environ is None else environ
    pid = os.getpid()
    if pid in _serving:
        return _serving[pid] is not None
    path = environ.get(VARIABLE, "")
    if not path:
        return False  # not yet, maybe: a standby learns its socket with its rank
    _serving[pid] = None
    try:
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        # The agent removed any file of an earlier worker: one there now is somebody else's.
        listener.bind(path)
        listener.listen(4)
    except OSError as e:
        print(f"mxrun: cannot serve the flight recorder at {VARIABLE}={path!r} ({e}); the agent "
              "will not get this rank's collectives on a hang", file=sys.stderr, flush=True)
        return False
    _serving[pid] = listener
    atexit.register(_dump_at_exit, path + EXIT_SUFFIX, pid)
    threading.Thread(target=_accept_loop, args=(listener,), name="mxrun-flight-recorder",
                     daemon=True).start()
    return True


def _accept_loop(listener):
    while True:
        try:
            conn, _ = listener.accept()
        except OSError:
            return
        with conn:
            try:
                _answer(conn)
            except OSError:
                pass  # the agent gave up waiting: nothing to tell it


def _answer(conn):
    conn.settimeout(5.0)
    request = b""
    while not request.endswith(b"\n") and len(request) < _MAX_REQUEST:
        chunk = conn.recv(_MAX_REQUEST - len(request))
        if not chunk:
            return
        request += chunk
    if request != REQUEST:
        conn.sendall(b"error unknown request (expected fr_trace)\n")
        return
    try:
        body = json.dumps(dump(), default=str).encode()
    except Exception as e:  # a torch without the recorder, a dump that fails: say what happened
        conn.sendall(f"error {type(e).__name__}: {e}".replace("\n", " ").encode() + b"\n")
        return
    conn.settimeout(30.0)
    conn.sendall(b"ok %d\n" % len(body) + body)


def is_collective_failure(error):
    """Whether an exception is a collective's (its type's name or its text has PyTorch's words)."""
    if error is None:
        return False
    text = f"{type(error).__name__}: {error}"
    return any(sign in text for sign in COLLECTIVE_SIGNS)


def _dump_at_exit(path, pid):
    """At exit after an uncaught collective exception (Python set sys.last_value as it printed
    it)."""
    if os.getpid() != pid or not is_collective_failure(getattr(sys, "last_value", None)):
        return
    try:
        body = json.dumps(dump(), default=str)
        with open(path + ".tmp", "w", encoding="utf-8") as f:
            f.write(body)
        os.replace(path + ".tmp", path)  # whole or not at all
    except Exception:
        pass  # diagnostics only: the exit goes on as it would


def dump():
    """This rank's recorder as a dict (the analyzer's pickle format, JSON-safe)."""
    torch = sys.modules.get("torch")
    if torch is None or "torch.distributed" not in sys.modules:
        raise RuntimeError("torch.distributed is not imported in this worker")
    from torch._C._distributed_c10d import _dump_fr_trace
    record = pickle.loads(_dump_fr_trace())
    groups = group_table()
    if groups:
        record["pg_config"] = groups
    record["mxrun"] = {"rank": _int(os.environ.get("RANK")), "pid": os.getpid(),
                       "host": os.environ.get("MXRUN_HOST", "")}
    return record


def group_table():
    """{group name: {name, desc, ranks}} for every group this rank belongs to, from
    torch.distributed's own bookkeeping; {} when it cannot be read (private names change)."""
    try:
        import torch.distributed as dist
        from torch.distributed import distributed_c10d as c10d
        if not dist.is_initialized():
            return {}
        table = {}
        for group, name in c10d._world.pg_names.items():
            ranks = sorted(c10d._world.pg_group_ranks.get(group, {}).keys())
            desc = getattr(group, "group_desc", "") or ""
            table[str(name)] = {"name": str(name), "desc": desc, "ranks": str(ranks)}
        return table
    except Exception:
        return {}


def _int(text):
    try:
        return int(text)
    except (TypeError, ValueError):
        return -1
