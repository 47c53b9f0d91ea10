"""The worker's end of mxrun's control channel (common/control_protocol.h holds the protocol).

mxrun hands each worker one end of an AF_UNIX stream socket pair as file descriptor 3 and names it
in MXRUN_CONTROL_FD; messages are JSON objects, one per line. This file only finds and checks that
end and writes lines to it; what is written is the callers' business.

A worker must not trust a descriptor because a variable names it: a process the worker started
inherits the variable but not (with Python's default close_fds) the descriptor, and its fd 3 may
then be anything. So the end is used only when it is a Unix stream socket whose peer is this
process's parent or another ancestor: the mxrun agent that started the worker (directly, or
through a shell the user put in between).
"""
import atexit
import os
import socket
import stat
import sys

VARIABLE = "MXRUN_CONTROL_FD"
_MAX_ANCESTORS = 16  # how far up the process tree the agent may be (a few wrappers)


def _parent_of(pid):
    """The parent pid of `pid` from /proc, or None."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            text = f.read()
    except OSError:
        return None
    # "pid (comm) state ppid ...": comm may hold spaces and parentheses; the last ')' ends it.
    fields = text[text.rfind(b")") + 2:].split()
    try:
        return int(fields[1])
    except (IndexError, ValueError):
        return None


def _is_ancestor(pid, of_pid):
    current = of_pid
    for _ in range(_MAX_ANCESTORS):
        current = _parent_of(current)
        if current is None or current <= 0:
            return False
        if current == pid:
            return True
    return False


class Channel:
    """A checked control channel. `send` never blocks and never raises: a full or closed channel
    drops the line (progress is sent again with the next step) and reports False."""

    def __init__(self, sock):
        self._sock = sock
        self.closed = False

    def fileno(self):
        return self._sock.fileno()

    def reader(self):
        """A blocking binary file over the channel's incoming lines (the agent's notices), for
        one reading thread."""
        return socket.socket(fileno=os.dup(self._sock.fileno())).makefile("rb")

    def send(self, line):
        if self.closed:
            return False
        try:
            self._sock.send(line.encode() + b"\n", socket.MSG_DONTWAIT | socket.MSG_NOSIGNAL)
            return True
        except BlockingIOError:
            return False  # the agent is busy and its buffer full: this report is dropped
        except OSError:
            self.closed = True  # the agent is gone: nobody to report to
            return False


def open_from_environment(environ=None, warn=None):
    """The channel mxrun gave this process, or None (no mxrun: another launcher, or none).
    A variable that names something unusable gets one warning (to `warn`, default stderr) and
    None, so the script runs on as it would without mxrun."""
    environ = os.environ if environ is None else environ
    value = environ.get(VARIABLE)
    if value is None or value == "":
        return None

    def refuse(why):
        message = (f"mxrun: {VARIABLE}={value!r} {why}; progress is not reported to mxrun "
                   "(the script runs on as without it)")
        (warn or (lambda m: print(m, file=sys.stderr, flush=True)))(message)
        return None

    try:
        fd = int(value)
    except ValueError:
        return refuse("is not a file descriptor number")
    if fd < 0:
        return refuse("is not a file descriptor number")
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return refuse("is not an open file descriptor in this process (a process started by the "
                      "worker inherits the variable, not the descriptor)")
    if not stat.S_ISSOCK(mode):
        return refuse("is not a socket")
    try:
        sock = socket.socket(fileno=os.dup(fd))  # a copy: the worker's fd 3 stays as it was
    except OSError as e:
        return refuse(f"cannot be used ({e})")
    if sock.family != socket.AF_UNIX or sock.type != socket.SOCK_STREAM:
        sock.close()
        return refuse("is not a Unix stream socket")
    try:
        import struct
        creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
        peer_pid = struct.unpack("3i", creds)[0]
    except OSError as e:
        sock.close()
        return refuse(f"cannot be checked ({e})")
    if not _is_ancestor(peer_pid, os.getpid()):
        sock.close()
        return refuse(f"is held by pid {peer_pid}, which did not start this process")
    return Channel(sock)


_SHARED = {}  # pid -> this process's channel (or None): opened, checked and warned about once


def shared():
    """The channel mxrun gave this process (os.environ's), opened once for every user in it: the
    progress reports and in-process recovery write to the same one, and a bad variable is
    warned about once. A forked child opens its own (and, its parent not being the agent, finds
    none)."""
    pid = os.getpid()
    if pid not in _SHARED:
        _SHARED[pid] = open_from_environment()
        if _SHARED[pid] is not None:
            atexit.register(_say_leaving, pid)
    return _SHARED[pid]


def _say_leaving(pid):
    """At the interpreter's exit: {"leaving": true}. A stop that follows a peer's death then lets
    this process finish exiting instead of signalling it (agent/workers/survivors_leave.h): a
    stop signal in the middle of an exit can slow it down (Lightning's SIGTERM handler
    broadcasts on the broken group first). Registered when the channel opens, so it runs after
    the handlers registered later (the last progress report goes first)."""
    channel = _SHARED.get(pid)
    if channel is not None and os.getpid() == pid:
        channel.send('{"leaving": true}')
