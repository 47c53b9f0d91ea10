"""Progress reports: `mxrun.step_done(step)` once per training step.

The report is the control protocol's {"step": N, "step_seconds": S} (with "auto": true when
_auto_progress counted the step for a script that never reports itself, and "busy_seconds": B,
the rank's own work per step, when _busy_time measured it); from it mxrun's agent makes
its goodput accounting (start-up, training, restarts, lost work), the per-rank metrics, the
straggler report, the ranks table of `mxrun status`, and the heartbeat that --hang_timeout
judges. At most one report leaves per MIN_INTERVAL (as the bundled trainer's): a fast step costs
a clock read and two comparisons; a report carries the mean step time since the last one. The
last step is sent at exit if it was held back.

Without mxrun (torchrun, or no launcher) every call returns at once after the first.
"""
import atexit
import operator
import os
import time

from . import _busy_time, _channel, _flight_recorder

MIN_INTERVAL = 0.05  # seconds between two reports


class Progress:
    def __init__(self, channel, clock=time.monotonic):
        self._channel = channel
        self._clock = clock
        self._pid = os.getpid()
        self._last_sent = None  # when the last report left
        self._since = None  # (time, step) the next report's step time counts from
        self._step = 0  # the last step completed
        self._pending = False  # a completed step not yet reported
        self._automatic = False  # the last step was counted by _auto_progress, not the script
        self._busy = [0.0, 0]  # busy seconds and steps measured since the last report

    def step_done(self, step=None, automatic=False, busy=None):
        now = self._clock()
        self._automatic = automatic
        if step is None:
            step = self._step + 1
        elif type(step) is not int:
            # numpy's and torch's integers too (anything with __index__), never a bool or float
            if isinstance(step, bool) or not hasattr(type(step), "__index__"):
                raise TypeError(f"mxrun.step_done(step): step must be an integer, got {step!r}")
            step = operator.index(step)
        if step < 0:
            raise ValueError(f"mxrun.step_done(step): step must be >= 0, got {step}")
        self._step = step
        if busy is not None:
            self._busy[0] += busy
            self._busy[1] += 1
        since = self._since
        if (since is not None and step > since[1] and self._last_sent is not None
                and now - self._last_sent < MIN_INTERVAL):
            self._pending = True
            return
        self._send(now, step)

    def restart(self):
        """The steps before now do not time the next one (a restore, an evaluation between)."""
        self._since = None

    def flush(self):
        """Sends the last completed step if it was held back (at exit)."""
        if self._pending and os.getpid() == self._pid:
            self._send(self._clock(), self._step)

    def _send(self, now, step):
        if os.getpid() != self._pid:
            return  # a forked child (a data loader's worker): the channel is its parent's
        since = self._since
        if since is not None and step > since[1]:
            seconds = (now - since[0]) / (step - since[1])
            line = '{"step": %d, "step_seconds": %.6f}' % (step, max(seconds, 0.0))
        else:
            line = '{"step": %d}' % step
        if self._busy[1]:  # the mean of the steps measured since the last report
            line = line[:-1] + ', "busy_seconds": %.6f}' % max(self._busy[0] / self._busy[1], 0.0)
            self._busy = [0.0, 0]
        if self._automatic:  # the agent's first-step rule then waits for the user to ask for it
            line = line[:-1] + ', "auto": true}'
        self._channel.send(line)
        self._last_sent = now
        self._since = (now, step)
        self._pending = False


_progress = None  # this process's reporter, made at the first call
_disabled = False  # no mxrun here: every call returns at once
_explicit = False  # the script reports its own steps: the automatic count (_auto_progress) stops
_framework = False  # a framework's step counter reports (_framework_progress): the optimizer
                    # hook's count stops


def step_done(step=None):
    """Tell mxrun that training step `step` is complete (default: the previous one plus 1).

    Call it once per optimizer step, after the step. Steps may go back (after a restore). Under
    another launcher, or with no launcher at all, it does nothing."""
    reports_itself()
    _report(step, False)


def reports_itself():
    """The script reports its own steps (mxrun.step_done, mxrun.run): the automatic count stops."""
    global _explicit
    _explicit = True


def auto_step_done(step):
    """The optimizer hook's report (`_auto_progress`): dropped once the script reports itself or
    a framework's counter does."""
    if not _explicit and not _framework:
        _report(step, True)


def framework_reports():
    """A framework's step counter will report (`_framework_progress`, from the moment its
    trainer is made): the optimizer hook's reports are dropped from now on, so that a restarted
    job's first report is the framework's step, not the hook's count from 1."""
    global _framework
    _framework = True


def framework_step_done(step):
    """A framework's global step: automatic too; dropped once the script reports itself."""
    framework_reports()
    if not _explicit:
        _report(step, True)


def _report(step, automatic):
    global _progress, _disabled
    if _disabled:
        return
    if _progress is None:
        channel = _channel.shared()
        if channel is None:
            _disabled = True
            return
        _progress = Progress(channel)
        atexit.register(_progress.flush)
        _flight_recorder.serve()  # the agent may ask for the recorder's dump on a hang
    _progress.step_done(step, automatic, _busy_time.take())


def restart_timing():
    """The next step's time is not measured from the previous step (call it after an
    evaluation, a checkpoint or a restore between two steps). Optional."""
    if _progress is not None:
        _progress.restart()
