"""The agreed state, from the rank that holds it to every other rank, tensors in place.

`share(state, source)` makes every rank's `state` ({name: object with state_dict() and
load_state_dict()}) the source rank's. The source's state_dicts travel in two parts:

- their shape (dicts, lists, numbers, settings, and for each tensor its shape, dtype and whether
  it lived on the CPU or the accelerator), pickled with broadcast_object_list: a few kB;
- their tensors, flattened into one buffer per dtype on the group's device (the GPU with NCCL)
  and broadcast in place: no pickling of the weights, no copy through the host on a GPU, and no
  tensor unpickled onto the device index the source used (another rank's GPU).

Each tensor comes back on the kind of device it left: an optimizer's step counter on the CPU stays
there (Adam refuses a CUDA `step` unless capturable), a parameter or a moment buffer on the
accelerator goes to this rank's own.
"""


class _Slot:
    """Where a tensor was in a state_dict: its place in the flat buffer of its dtype."""
    __slots__ = ("dtype", "shape", "on_cpu", "index")

    def __init__(self, dtype, shape, on_cpu, index):
        self.dtype, self.shape, self.on_cpu, self.index = dtype, shape, on_cpu, index


def strip(value, tensors):
    """`value` with every tensor replaced by a _Slot; the tensors appended to `tensors`."""
    import torch
    if isinstance(value, torch.Tensor):
        tensors.append(value)
        return _Slot(value.dtype, tuple(value.shape), value.device.type == "cpu",
                     len(tensors) - 1)
    if isinstance(value, dict):
        return type(value)((k, strip(v, tensors)) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return type(value)(strip(v, tensors) for v in value)
    return value


def fill(value, tensors):
    """`value` with every _Slot replaced by its tensor from `tensors` (by index)."""
    if isinstance(value, _Slot):
        return tensors[value.index]
    if isinstance(value, dict):
        return type(value)((k, fill(v, tensors)) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return type(value)(fill(v, tensors) for v in value)
    return value


def slots(value):
    """Every _Slot in `value`, in index order."""
    found = []

    def walk(v):
        if isinstance(v, _Slot):
            found.append(v)
        elif isinstance(v, dict):
            for item in v.values():
                walk(item)
        elif isinstance(v, (list, tuple)):
            for item in v:
                walk(item)
    walk(value)
    return sorted(found, key=lambda slot: slot.index)


def share(state, source, device):
    """Every rank's `state` becomes rank `source`'s. `device`: where the group's collectives run
    ("cpu" for Gloo, "cuda" for NCCL: this rank's current GPU)."""
    import torch
    import torch.distributed as dist
    rank = dist.get_rank()
    tensors = []
    shape = None
    if rank == source:
        shape = strip({name: holder.state_dict() for name, holder in state.items()}, tensors)
    payload = [shape]
    dist.broadcast_object_list(payload, src=source)
    shape = payload[0]
    places = slots(shape)
    received = [None] * len(places)
    for dtype in sorted({s.dtype for s in places}, key=str):  # the same order on every rank
        group = [s for s in places if s.dtype == dtype]
        sizes = [torch.Size(s.shape).numel() for s in group]
        if rank == source:
            flat = torch.cat([tensors[s.index].detach().reshape(-1).to(device) for s in group])
        else:
            flat = torch.empty(sum(sizes), dtype=dtype, device=device)
        dist.broadcast(flat, src=source)
        if rank == source:
            continue
        for s, part in zip(group, torch.split(flat, sizes)):
            part = part.view(s.shape)
            received[s.index] = part.to("cpu") if s.on_cpu else part.clone()
    if rank == source:
        return
    dicts = fill(shape, received)
    for name, holder in state.items():
        holder.load_state_dict(dicts[name])
