"""A rank's own work in each training step, for the straggler report, with no code change.

Why: under synchronous data parallel every rank's step lasts as long as the slowest rank's (DDP's
gradient all-reduce waits for it), so step times cannot tell which rank is slow; the time a rank
spends on work of its own can. Per step of the counted optimizer (_auto_progress), this measures:
- input: from the optimizer's previous step to the model's first forward (loading and moving the
  batch, zero_grad, the script's own bookkeeping);
- forward: the model's forwards with gradients on (every micro-batch of a gradient accumulation;
  an evaluation under no_grad is left out), timed inside DistributedDataParallel's wrapper, since
  DDP's forward first broadcasts buffers, a wait on the other ranks.
Backward is not measured: DDP's all-reduce runs inside it, so its time is partly waiting. A slow
rank (a slower or busier machine, a slow input pipeline) is slow in the parts measured too.

The report carries it as "busy_seconds" beside "step_seconds"; the agent and the master judge
stragglers by it when every report has it (common/straggler_watch.h).

Not measured (nothing is reported, and stragglers are judged by step time as before): a model
sharded by FSDP (its forward gathers parameters, a collective), and a model that is never called
as a module. The model is found once per counted optimizer: after its step, a global forward
pre-hook waits for the first module call that holds the optimizer's first parameter (the
outermost: the model, or DDP around it) for at most SEARCH_STEPS steps, then removes itself; from
then on only the model's own hooks run, a few clock reads per forward.
"""
import functools
import sys
import time
import weakref

SEARCH_STEPS = 3  # optimizer steps to wait for the model's forward before giving up


def _guarded(hook):
    """A hook that runs inside the script's forward: a failure of the measurement never fails the
    forward; the clock stops instead (its hooks removed, nothing more reported)."""
    @functools.wraps(hook)
    def guarded(self, *args):
        try:
            return hook(self, *args)
        except Exception:  # noqa: BLE001 - the training goes on without the measurement
            self.stop()
            return None
    return guarded


class BusyClock:
    def __init__(self, clock=time.perf_counter, register_global_pre_hook=None):
        self._clock = clock
        self._register_global = register_global_pre_hook  # None: torch's (tests inject one)
        self._optimizer = None  # weakref to the counted optimizer
        self._target = None  # weakref to its first parameter, while the model is searched
        self._searched_steps = 0
        self._search_handle = None  # the global pre-hook's handle while searching
        self._model = None  # weakref to the module found
        self._model_handles = []
        self._step_end = None  # when the counted optimizer last stepped
        self._input = None  # this step's input seconds, once its first forward came
        self._forward = 0.0  # this step's forward seconds so far
        self._forward_started = None
        self._finished = None  # the last complete step's busy seconds, not yet taken
        self.stopped = False

    def step_ended(self, optimizer):
        """The counted optimizer stepped: the step's own work is complete."""
        if self.stopped:
            return
        now = self._clock()
        if self._optimizer is None or self._optimizer() is not optimizer:
            self._forget_model()  # a new optimizer (the first, or one made after a restore)
            self._optimizer = weakref.ref(optimizer)
            self._searched_steps = 0
            self._finished = None
        elif self._step_end is not None and self._input is not None and self._forward > 0:
            self._finished = self._input + self._forward
        else:
            self._finished = None
        self._step_end = now
        self._input = None
        self._forward = 0.0
        self._forward_started = None
        if self._model is None or self._model() is None:
            self._search(optimizer)

    def stop(self):
        """Measures nothing more (a hook failed)."""
        self._forget_model()
        self._searched_steps = SEARCH_STEPS
        self._optimizer = self._finished = None
        self.stopped = True

    def take(self):
        """The last complete step's busy seconds (None: not known), once."""
        value, self._finished = self._finished, None
        return value

    # --- finding the model ---

    def _search(self, optimizer):
        if self._searched_steps >= SEARCH_STEPS:
            self._stop_search()
            return
        self._searched_steps += 1
        target = _first_parameter(optimizer)
        if target is None:
            return
        self._target = weakref.ref(target)
        if self._search_handle is None:
            register = self._register_global
            if register is None:
                register = sys.modules["torch.nn.modules.module"].register_module_forward_pre_hook
            self._search_handle = register(self._searching)

    @_guarded
    def _searching(self, module, args):
        target = self._target() if self._target is not None else None
        if target is None:
            self._stop_search()
            return
        if not any(p is target for p in module.parameters()):
            return  # not the model: a loss, a transform, another model
        self._stop_search()
        if _sharded(module):
            return  # its forward gathers parameters: not the rank's own work alone
        self._hook_model(module)
        self._outer_starts()  # this call's own pre-hooks were read before it was hooked
        if self._inner_of(module) is module:
            self._inner_starts()

    def _stop_search(self):
        self._target = None
        if self._search_handle is not None:
            self._search_handle.remove()
            self._search_handle = None

    def _hook_model(self, outer):
        inner = self._inner_of(outer)
        self._model = weakref.ref(outer)
        # First among the module's pre-hooks, so that another hook's wait is not called input.
        self._model_handles = [outer.register_forward_pre_hook(self._outer_pre, prepend=True)]
        if inner is not outer:
            self._model_handles.append(inner.register_forward_pre_hook(self._inner_pre,
                                                                       prepend=True))
        self._model_handles.append(inner.register_forward_hook(self._inner_post))

    def _forget_model(self):
        self._stop_search()
        for handle in self._model_handles:
            handle.remove()
        self._model_handles = []
        self._model = None

    @staticmethod
    def _inner_of(module):
        ddp = getattr(sys.modules.get("torch.nn.parallel"), "DistributedDataParallel", None)
        if ddp is not None and isinstance(module, ddp):
            return module.module
        return module

    # --- the model's hooks ---

    @_guarded
    def _outer_pre(self, module, args):
        self._outer_starts()
        if self._inner_of(module) is module:
            self._inner_starts()

    @_guarded
    def _inner_pre(self, module, args):
        self._inner_starts()

    @_guarded
    def _inner_post(self, module, args, output):
        if self._forward_started is not None:
            self._forward += self._clock() - self._forward_started
            self._forward_started = None

    def _outer_starts(self):
        if self._input is None and self._step_end is not None and _grad_enabled():
            self._input = self._clock() - self._step_end

    def _inner_starts(self):
        if _grad_enabled():
            self._forward_started = self._clock()


def _first_parameter(optimizer):
    for group in getattr(optimizer, "param_groups", ()):
        for parameter in group.get("params", ()):
            return parameter
    return None


def _grad_enabled():
    torch = sys.modules.get("torch")
    return torch is None or torch.is_grad_enabled()


def _sharded(module):
    """FSDP (either) anywhere in the model: its forward all-gathers parameters."""
    kinds = tuple(k for k in (
        getattr(sys.modules.get("torch.distributed.fsdp"), "FSDPModule", None),
        getattr(sys.modules.get("torch.distributed.fsdp"), "FullyShardedDataParallel", None),
    ) if isinstance(k, type))
    return bool(kinds) and any(isinstance(m, kinds) for m in module.modules())


_clock = None  # this process's, made by _auto_progress once torch is imported


def start():
    """The clock `_auto_progress` feeds; made once."""
    global _clock
    if _clock is None:
        _clock = BusyClock()
    return _clock


def take():
    """The last complete step's busy seconds, for the next progress report (None: unknown)."""
    return _clock.take() if _clock is not None else None
