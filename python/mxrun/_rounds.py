"""The agent's round notices, read on a thread of their own (common/control_protocol.h):

    {"round": N, "env": {"RANK": "1", "WORLD_SIZE": "2", ...}, "failure_time": T}

the group was re-formed as round N; `env` is this worker's whole torchrun contract for it. The
newest notice is kept (an older one is stale); the training loop asks for it at its safe points
(`pending`, `take`) and after a collective failed. A Gloo collective on a dead peer raises at once
when the peer's connection closes (PyTorch 2.13's Gloo cannot be aborted from another thread: its
abort is the base class's no-op); with NCCL, `on_notice` aborts the communicators from this
thread (`_nccl.py`).
"""
import json
import threading


class RoundPending(Exception):
    """Raised at a safe point (`ctx.step_done`, before an optimizer step with NCCL) when the group
    is being re-formed: `mxrun.run` catches it and takes the new round."""


class RoundNotice:
    __slots__ = ("round", "env", "failure_time")

    def __init__(self, round_, env, failure_time):
        self.round, self.env, self.failure_time = round_, env, failure_time


def parse_notice(line):
    """A notice from one line, or ValueError saying what is wrong with it."""
    try:
        message = json.loads(line)
    except ValueError as e:
        raise ValueError(f"a control line is not JSON: {line[:200]!r}") from e
    if not isinstance(message, dict) or "round" not in message:
        raise ValueError(f"unknown control message from the agent (expected \"round\"): "
                         f"{line[:200]!r}")
    round_ = message["round"]
    if type(round_) is not int or round_ < 0:
        raise ValueError(f"a round notice's 'round' must be a non-negative integer: {round_!r}")
    env = message.get("env")
    if not isinstance(env, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                            for k, v in env.items()):
        raise ValueError("a round notice needs \"env\", an object of strings")
    failure_time = message.get("failure_time", 0)
    if isinstance(failure_time, bool) or not isinstance(failure_time, (int, float)):
        raise ValueError(f"a round notice's 'failure_time' must be a number: {failure_time!r}")
    return RoundNotice(round_, env, float(failure_time))


class RoundListener:
    def __init__(self, reader, warn=None, on_notice=None):
        """`reader`: a binary file object over the channel (its lines); `on_notice(notice)` runs on
        the listener's thread as each notice comes."""
        self._reader = reader
        self._warn = warn
        self._on_notice = on_notice
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._newest = None
        self.closed = False
        self._thread = threading.Thread(target=self._read, name="mxrun-rounds", daemon=True)
        self._thread.start()

    def pending(self):
        with self._lock:
            return self._newest is not None

    def take(self, timeout):
        """The newest notice, waiting up to `timeout` seconds (None: until one comes or the channel
        closes); None when none came."""
        with self._changed:
            self._changed.wait_for(lambda: self._newest is not None or self.closed, timeout)
            notice, self._newest = self._newest, None
            return notice

    def _read(self):
        try:
            for line in self._reader:
                line = line.strip()
                if not line:
                    continue
                try:
                    notice = parse_notice(line.decode("utf-8", "replace"))
                except ValueError as e:
                    if self._warn:
                        self._warn(f"mxrun: ignoring a control line: {e}")
                    continue
                with self._changed:
                    self._newest = notice
                    self._changed.notify_all()
                if self._on_notice is not None:
                    try:
                        self._on_notice(notice)
                    except Exception as e:  # noqa: BLE001 - the training thread still sees it
                        if self._warn:
                            self._warn(f"mxrun: on a round notice: {type(e).__name__}: {e}")
        except (OSError, ValueError):
            pass
        with self._changed:
            self.closed = True
            self._changed.notify_all()
