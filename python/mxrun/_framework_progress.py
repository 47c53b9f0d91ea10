"""Progress from the frameworks' own step counters, with no code change: PyTorch Lightning's
`trainer.global_step` and the Hugging Face `Trainer`'s `state.global_step`.

Both count optimizer steps and come back with a checkpoint (Lightning's `last.ckpt`, the
Trainer's `checkpoint-N/trainer_state.json`), so after a restart from one the reports go on
from the checkpoint's step, and mxrun counts the steps trained again as lost work. A report
says a step was just completed (the first one after a restart is the checkpoint's step plus
1: the agent reads the step the group went on from in it), so nothing is said as a fit
begins, and the set-up before the first step counts as start-up. The
optimizer hook's count (`_auto_progress`) cannot tell that for an optimizer that keeps no step
of its own (SGD). From the moment a framework's trainer is made the optimizer hook's reports
are dropped (`_progress.framework_reports`); the script's own `mxrun.step_done` wins over both.

How each gets in:
- Lightning loads callbacks from the entry point groups `lightning.pytorch.callbacks_factory`
  and `pytorch_lightning.callbacks_factory` into every Trainer; the wheel declares
  `lightning_callbacks` and `pytorch_lightning_callbacks` there (scripts/wheel/assemble_wheel.py).
  Outside mxrun, or with MXRUN_AUTO_PROGRESS=0, they return no callback.
- The Transformers Trainer has no such registry: when `transformers.trainer` is imported
  (`_auto_progress`'s import watcher), `Trainer.__init__` is wrapped to add one callback.
Accelerate has no step counter of its own: its steps are the optimizer hook's.
"""
import functools
import sys

from . import _auto_progress, _progress


class _Steps:
    """Reports a framework's global step when it changes (a batch of a gradient accumulation
    that did not step the optimizer repeats the step: not a report)."""

    def __init__(self):
        self._last = None

    def seen(self, step):
        if type(step) is not int or step < 0 or step == self._last:
            return
        self._last = step
        _progress.framework_step_done(step)


def lightning_callbacks():
    """Entry point `lightning.pytorch.callbacks_factory`: the callback, under mxrun."""
    return _lightning_callbacks("lightning.pytorch")


def pytorch_lightning_callbacks():
    """Entry point `pytorch_lightning.callbacks_factory` (the older package name)."""
    return _lightning_callbacks("pytorch_lightning")


def _lightning_callbacks(package):
    if not _auto_progress.wanted():
        return []
    try:
        callback_base = __import__(package, fromlist=["Callback"]).Callback
    except (ImportError, AttributeError):
        return []
    steps = _Steps()
    _progress.framework_reports()  # (a Trainer is being made: its steps are the ones to count)

    class MxrunProgress(callback_base):
        """mxrun's progress reports: the trainer's global step after each training batch."""

        def on_train_batch_end(self, trainer, *args, **kwargs):
            _auto_progress._safely(steps.seen, getattr(trainer, "global_step", None))

    return [MxrunProgress()]


def hook_transformers(module):
    """`transformers.trainer` was imported: every Trainer made from now on gets the callback."""
    trainer_class = getattr(module, "Trainer", None)
    callback_base = getattr(sys.modules.get("transformers.trainer_callback"), "TrainerCallback",
                            None)
    if trainer_class is None or callback_base is None:
        return
    if getattr(trainer_class.__init__, "_mxrun_wrapped", False):
        return

    class MxrunProgress(callback_base):
        """mxrun's progress reports: the Trainer's global step after each optimizer step."""

        def __init__(self):
            self._steps = _Steps()

        def on_step_end(self, args, state, control, **kwargs):
            _auto_progress._safely(self._steps.seen, getattr(state, "global_step", None))

    original = trainer_class.__init__

    @functools.wraps(original)
    def __init__(self, *args, **kwargs):
        original(self, *args, **kwargs)
        if _auto_progress.wanted():
            _progress.framework_reports()
            _auto_progress._safely(self.add_callback, MxrunProgress())

    __init__._mxrun_wrapped = True
    trainer_class.__init__ = __init__
