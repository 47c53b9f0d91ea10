"""Progress with no code change: one completed step per `optimizer.step()` of the script's
optimizer, reported as `mxrun.step_done` would, for scripts (and frameworks' trainers) that never
call the module.

The wheel puts `mxrun-auto-progress.pth` into site-packages, so that every interpreter start in
that environment runs one line: outside mxrun (no MXRUN_CONTROL_FD) it stops there, and
MXRUN_AUTO_PROGRESS=0 turns it off. Under mxrun it calls `install()`, which never imports torch
(the interpreter may never use it): a finder on sys.meta_path waits for the script's `import
torch` to end (torch imports torch.optim and torch.amp itself), then registers PyTorch's global
post-hook of every optimizer's step (`torch.optim.optimizer.register_optimizer_step_post_hook`).

What is counted:
- the first optimizer that steps (a GAN's second, a second model's, are not counted again); when
  it is gone (garbage-collected, made anew after a restore) the next one that steps is;
- gradient accumulation steps the optimizer once per N batches: one step per optimizer step;
- the step number is the optimizer's own when its state keeps one on the CPU (Adam, AdamW,
  RMSprop, Adagrad...: restored with a checkpoint, so a resumed run goes on from its step), else
  one more than the last;
- AMP's GradScaler skips `optimizer.step()` when it finds inf or NaN gradients: that call reports
  the same step again, a heartbeat with no new step (`GradScaler.step` is wrapped for it);
- from the script's first own `mxrun.step_done` (or `mxrun.run`), its reports win and the
  automatic ones are dropped (`_progress.auto_step_done`);
- Lightning's and the Transformers Trainer's own global step replaces the count from the moment
  their trainer is made (`_framework_progress`; the same watcher waits for
  `transformers.trainer`).
The counted optimizer's steps also time each rank's own work per step (`_busy_time`), which names
stragglers under synchronous data parallel, where every rank's step time is the slowest one's.
"""
import importlib.abc
import os
import sys
import weakref

VARIABLE = "MXRUN_AUTO_PROGRESS"


def _hook_transformers(module):
    from . import _framework_progress
    _framework_progress.hook_transformers(module)


# The imports waited for, and what runs once each module's own code has run: torch's optimizer
# hook, and the Transformers Trainer's callback (_framework_progress).
_WATCHED = {"torch": lambda module: hook(module), "transformers.trainer": _hook_transformers}


def wanted(environ=None):
    """Whether this interpreter counts steps: under mxrun and not turned off."""
    environ = os.environ if environ is None else environ
    return bool(environ.get("MXRUN_CONTROL_FD")) and environ.get(VARIABLE, "1") != "0"


def install(environ=None):
    """At interpreter start (the wheel's .pth): hooks the optimizers once torch is imported.
    Returns whether it will (or did)."""
    if not wanted(environ):
        return False
    pending = {}
    for name, then in _WATCHED.items():
        if name in sys.modules:
            _safely(then, sys.modules[name])
        else:
            pending[name] = then
    if pending and not any(isinstance(f, _Watcher) for f in sys.meta_path):
        sys.meta_path.insert(0, _Watcher(pending))
    return True


class _Watcher(importlib.abc.MetaPathFinder):
    """Finds nothing itself: when a watched module is about to be imported, it lets the other
    finders find it and runs what waits for it after the module's own code; it leaves
    sys.meta_path once none waits."""

    def __init__(self, pending):
        self._pending = dict(pending)

    def find_spec(self, fullname, path, target=None):
        then = self._pending.pop(fullname, None)
        if then is None:
            return None
        if not self._pending:
            sys.meta_path[:] = [f for f in sys.meta_path if f is not self]
        for finder in sys.meta_path:
            if finder is self:
                continue
            find = getattr(finder, "find_spec", None)
            spec = find(fullname, path, target) if find is not None else None
            if spec is not None:
                break
        else:
            return None
        loader = spec.loader
        original = getattr(loader, "exec_module", None)
        if original is None:
            return spec

        def exec_module(module):
            original(module)
            _safely(then, module)
        loader.exec_module = exec_module  # this spec's loader only
        return spec


class Counter:
    """Counts the steps of one optimizer and reports them through `report(step)`."""

    def __init__(self, report, step_ended=None):
        self._report = report
        self._step_ended = step_ended  # told first: the step's busy time is then complete
        self._optimizer = None  # weakref to the optimizer counted
        self.step = 0
        self.calls = 0  # optimizer steps seen (GradScaler's wrapper compares it)

    def counts(self, optimizer):
        current = self._optimizer() if self._optimizer is not None else None
        if current is None:
            self._optimizer = weakref.ref(optimizer)
            return True
        return current is optimizer

    def stepped(self, optimizer, args=None, kwargs=None):
        """The post-hook: `optimizer` has stepped."""
        _safely(self._stepped, optimizer)

    def _stepped(self, optimizer):
        if not self.counts(optimizer):
            return
        self.calls += 1
        if self._step_ended is not None:
            self._step_ended(optimizer)
        own = state_step(optimizer)
        self.step = own if own is not None else self.step + 1
        self._report(self.step)

    def skipped(self, optimizer):
        """GradScaler skipped `optimizer`'s step: the same step again, as a heartbeat."""
        if self.counts(optimizer):
            self._report(self.step)


def state_step(optimizer):
    """The optimizer's own step count when its state keeps one as a number or a CPU tensor (read
    from the first parameter that has state; a GPU tensor is not read: that would wait for the
    GPU), else None."""
    state = getattr(optimizer, "state", None)
    if not state:
        return None
    for group in optimizer.param_groups:
        for parameter in group.get("params", ()):
            entry = state.get(parameter)
            if not entry:
                continue
            value = entry.get("step") if isinstance(entry, dict) else None
            if value is None:
                return None
            device = getattr(value, "device", None)
            if device is not None and (device.type != "cpu" or value.numel() != 1):
                return None
            number = value.item() if device is not None else value
            if not isinstance(number, (int, float)) or number != number or number < 0:
                return None  # not a count (NaN, negative, something else)
            return int(number) if number < 1e15 else None
    return None


_counter = None


def hook(torch_module=None):
    """Registers the post-hook of every optimizer's step and wraps GradScaler.step (once)."""
    global _counter
    if _counter is not None:
        return
    import importlib
    from . import _busy_time, _progress
    _counter = Counter(_progress.auto_step_done, _busy_time.start().step_ended)
    try:
        optimizer_module = importlib.import_module("torch.optim.optimizer")
        register = optimizer_module.register_optimizer_step_post_hook
    except (ImportError, AttributeError):
        return  # a torch without the global hooks: nothing counted, as before
    register(_counter.stepped)
    _wrap_grad_scaler(_counter)


def _wrap_grad_scaler(counter):
    try:
        from torch.amp.grad_scaler import GradScaler as scaler
    except ImportError:
        return
    if getattr(scaler.step, "_mxrun_wrapped", False):
        return
    original = scaler.step

    def step(self, optimizer, *args, **kwargs):
        before = counter.calls
        result = original(self, optimizer, *args, **kwargs)
        if counter.calls == before:
            _safely(counter.skipped, optimizer)
        return result
    step._mxrun_wrapped = True
    step.__doc__ = original.__doc__
    step.__wrapped__ = original
    scaler.step = step


_warned = False


def _safely(function, *args):
    """Runs `function`: the reports are diagnostics, never a reason for the script's import or
    optimizer step to fail; the first failure is said once, then the count stops."""
    global _warned, _counter
    try:
        function(*args)
    except Exception as e:  # noqa: BLE001 - whatever it is, the training goes on
        if not _warned:
            _warned = True
            print(f"mxrun: the automatic progress reports stop ({type(e).__name__}: {e}); set "
                  f"{VARIABLE}=0 to silence this, or report steps with mxrun.step_done",
                  file=sys.stderr, flush=True)
        if isinstance(_counter, Counter):
            _counter._report = lambda step: None
