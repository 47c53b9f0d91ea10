"""mxrun's module for training scripts: tell the launcher how training goes.

    import mxrun
    for step, batch in enumerate(loader, start=1):
        ...                       # forward, backward, optimizer step
        mxrun.step_done(step)     # one call per step

For in-process recovery, put the loop in a function and hand it to `mxrun.run(train, state)`
(`_recovery.py` says how): survivors of a failure keep their process and state.

Under mxrun each call reports progress to the agent that started the worker (at most one report
per 50 ms): goodput, the per-rank step metrics, stragglers, `mxrun status` and --hang_timeout's
heartbeat come from it. Under torchrun, or with no launcher, every call is a no-op, so a script
runs unchanged anywhere. Standard library only; it never imports torch.
"""
from ._progress import restart_timing, step_done
from ._recovery import Context, RoundPending, run
from ._rng import RNG
from ._version import __version__

__all__ = ["step_done", "restart_timing", "run", "Context", "RoundPending", "RNG", "__version__"]
