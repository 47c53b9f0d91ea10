"""What in-process recovery needs where collectives are asynchronous: the NCCL path.

A Gloo collective on a dead peer raises at once, in the thread that called it, before the
optimizer step: the survivor's state stays that of its last completed step. An NCCL collective
does not: its kernel waits on the GPU for a peer that will never send, the CPU runs ahead, and
PyTorch's watchdog by default tears the whole process down when it sees the error. So, when the
group's backend is NCCL, `mxrun.run`:

- before the first group, sets TORCH_NCCL_ASYNC_ERROR_HANDLING=2 (on an error the watchdog aborts
  the communicator and keeps the process; PyTorch's default, 3, ends the process) and
  TORCH_NCCL_RETHROW_CUDA_ERRORS=0 (the watchdog does not rethrow into the process either, as
  NVIDIA's in-process restart asks), unless the script set them; a value that ends the process
  is named in a warning. ProcessGroupNCCL reads both when it is made.
- when a round notice comes, aborts the group's NCCL communicators from the listener's thread
  (`ProcessGroupNCCL.abort()`, as NVIDIA's in-process restart does from its monitor thread): the
  kernels waiting on the dead peer end, and the training thread's next wait raises;
- before each optimizer step of the optimizers in `state` (a step pre-hook), waits for the GPU's
  queued work and refuses the step (RoundPending) when a notice came meanwhile: an aborted
  all-reduce leaves partial sums in the gradients, and applying them would leave the survivor's
  model at neither step. torchft's Manager does the same before it lets an optimizer step
  (should_commit). The wait costs one host-device synchronization per step.
"""
import os

ERROR_HANDLING = "TORCH_NCCL_ASYNC_ERROR_HANDLING"
RETHROW = "TORCH_NCCL_RETHROW_CUDA_ERRORS"


def uses_nccl(backend):
    """Whether an init_process_group backend string ("nccl", "cpu:gloo,cuda:nccl") has NCCL."""
    return "nccl" in str(backend).lower()


def prepare_environment(environ, warn):
    """The watchdog's settings for in-process recovery, where the script left them unset."""
    environ.setdefault(ERROR_HANDLING, "2")
    environ.setdefault(RETHROW, "0")
    if environ[ERROR_HANDLING] not in ("0", "2"):
        warn(f"mxrun: {ERROR_HANDLING}={environ[ERROR_HANDLING]} makes PyTorch end this process "
             "when a peer fails, so it cannot take the next round in-process: mxrun.run works "
             "with 2 (its default) or 0")


def abort_communicators():
    """Aborts the default group's NCCL backend, from any thread: what waits on a dead peer ends."""
    import torch
    import torch.distributed as dist
    if not dist.is_initialized():
        return False
    from torch.distributed.distributed_c10d import _get_default_group
    backend = _get_default_group()._get_backend(torch.device("cuda"))
    backend.abort()
    return True


def guard_optimizer_steps(state, pending, synchronize, refusal):
    """A step pre-hook on every optimizer in `state`: `synchronize()`, then raise `refusal()` when
    `pending()` says a round notice came. Returns the hooks' handles (`.remove()` each)."""
    handles = []
    for holder in state.values():
        register = getattr(holder, "register_step_pre_hook", None)
        if register is None:
            continue

        def hook(_optimizer, _args, _kwargs):
            synchronize()
            if pending():
                raise refusal()

        handles.append(register(hook))
    return handles
