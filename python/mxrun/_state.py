"""The agreed state, from the rank that holds it to the ranks that do not, tensors in place.

`describe(dicts)` lists the leaves of a rank's state_dicts for the round's plan (`_classify.py`:
what is the group's and what is each rank's own). `share(state, dicts, source, device, plan,
holder)` then gives every rank that holds no state (a new process, a standby) the source's shared
leaves, while the ranks that hold the state keep theirs: their replicated leaves already equal the
source's (the plan compared them), their per-rank ones are their own. The source's state_dicts
travel in two parts:

- their shape (dicts, lists, numbers, settings, and for each shared tensor its shape, dtype and
  whether it lived on the CPU or the accelerator), pickled with broadcast_object_list: a few kB;
- their shared tensors, flattened into one buffer per dtype on the group's device (the GPU with
  NCCL) and broadcast in place: no pickling of the weights, no copy through the host on a GPU, and
  no tensor unpickled onto the device index the source used (another rank's GPU).

Each tensor comes back on the kind of device it left: an optimizer's step counter on the CPU stays
there (Adam refuses a CUDA `step` unless capturable), a parameter or a moment buffer on the
accelerator goes to this rank's own.
"""
import hashlib
import pickle

from . import _classify


class StateRefused(Exception):
    """The state cannot be agreed as the script gave it (the message says what and why)."""


class _Slot:
    """Where a tensor was in a state_dict: its place in the flat buffer of its dtype."""
    __slots__ = ("dtype", "shape", "on_cpu", "index")

    def __init__(self, dtype, shape, on_cpu, index):
        self.dtype, self.shape, self.on_cpu, self.index = dtype, shape, on_cpu, index


class _Own:
    """A leaf the source does not send: each rank that holds the state keeps its own."""
    __slots__ = ()


OWN = _Own()


def strip(value, tensors, shared=None, path=()):
    """`value` with every tensor replaced by a _Slot; the tensors appended to `tensors`. With
    `shared(path)`, a leaf for which it is false becomes OWN instead."""
    import torch
    if shared is not None and _is_leaf(value) and not shared(path):
        return OWN
    if isinstance(value, torch.Tensor):
        tensors.append(value)
        return _Slot(value.dtype, tuple(value.shape), value.device.type == "cpu",
                     len(tensors) - 1)
    if isinstance(value, dict):
        return type(value)((k, strip(v, tensors, shared, path + (k,))) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return type(value)(strip(v, tensors, shared, path + (i,)) for i, v in enumerate(value))
    return value


def fill(value, tensors, own=None, path=()):
    """`value` with every _Slot replaced by its tensor from `tensors` (by index), and every OWN
    by `own`'s leaf at the same path."""
    if isinstance(value, _Slot):
        return tensors[value.index]
    if isinstance(value, _Own):
        return _at(own, path)
    if isinstance(value, dict):
        return type(value)((k, fill(v, tensors, own, path + (k,))) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return type(value)(fill(v, tensors, own, path + (i,)) for i, v in enumerate(value))
    return value


def _is_leaf(value):
    return not isinstance(value, (dict, list, tuple))


def _at(value, path):
    for key in path:
        value = value[key]
    return value


def _is_dtensor(value):
    try:
        from torch.distributed.tensor import DTensor
    except ImportError:  # a PyTorch without DTensor: none can be here
        return False
    return isinstance(value, DTensor)


def _tensor_digest(tensor):
    """Equal for bitwise-equal tensors: SHA-1 of the bytes on the CPU (an equality check, not a
    seal; the fastest of hashlib's here: 45 MB in 0.12 s on 2 busy cores, BLAKE2 0.18 s); on an
    accelerator two position-weighted sums of the bytes, computed there (no copy to the host)."""
    import torch
    t = tensor.detach()
    if t.layout != torch.strided or t.is_quantized:
        return ("unhashable", repr(t.layout))
    data = t.contiguous().reshape(-1).view(torch.uint8)
    if data.device.type == "cpu":
        return hashlib.sha1(memoryview(data.numpy())).hexdigest()
    total = weighted = 0
    chunk = 1 << 24
    for start in range(0, data.numel(), chunk):
        part = data[start:start + chunk].to(torch.int64)
        weights = torch.arange(start, start + part.numel(), device=part.device) % 65521 + 1
        total += int(part.sum())
        weighted += int((part * weights).sum())
    return (data.numel(), total, weighted)


def _value_digest(value):
    try:
        data = pickle.dumps(value, protocol=4)
    except Exception:  # noqa: BLE001 - not picklable: compared by its text
        data = repr(value).encode()
    return hashlib.blake2b(data, digest_size=16).hexdigest()


def describe(value, path=(), digests=True):
    """The leaves of `value` (a rank's {name: state_dict()}) for `_classify.plan`. `digests`
    false: none computed (a rank that holds no state: its values are not evidence)."""
    leaves = []

    def visit(v, p):
        if isinstance(v, dict):
            for k, item in v.items():
                visit(item, p + (k,))
        elif isinstance(v, (list, tuple)):
            for i, item in enumerate(v):
                visit(item, p + (i,))
        elif type(v).__name__ == "ShardedTensor":
            raise StateRefused(
                f"mxrun.run: '{_classify.name(p)}' is a ShardedTensor (torch.distributed._shard, "
                "the old sharding API), which mxrun cannot share or keep; supported: tensors, "
                "DTensors (FSDP2, tensor parallel), numbers and other picklable values")
        elif _is_dtensor(v):
            placements = ",".join(str(x) for x in v.placements)
            leaves.append(_classify.Leaf(p, _classify.DTENSOR,
                                         f"{tuple(v.shape)} {v.dtype} [{placements}]", None))
        else:
            import torch
            if isinstance(v, torch.Tensor):
                leaves.append(_classify.Leaf(p, _classify.TENSOR, f"{tuple(v.shape)} {v.dtype}",
                                             _tensor_digest(v) if digests else None))
            else:
                leaves.append(_classify.Leaf(p, _classify.VALUE, type(v).__name__,
                                             _value_digest(v) if digests else None))
    visit(value, tuple(path))
    return leaves


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


def share(state, dicts, source, device, plan, holder):
    """The ranks that hold no state (`holder` false) load the source's shared leaves; every rank
    calls it (the broadcasts are collectives). `dicts`: this rank's {name: state_dict()};
    `device`: where the group's collectives run ("cpu" for Gloo, "cuda" for NCCL: this rank's
    current GPU)."""
    import torch
    import torch.distributed as dist
    rank = dist.get_rank()
    tensors = []
    shape = None
    if rank == source:
        shape = strip(dicts, tensors, plan.shared)
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
        if holder:
            continue  # its replicated leaves equal these; its per-rank ones are its own
        for s, part in zip(group, torch.split(flat, sizes)):
            part = part.view(s.shape)
            received[s.index] = part.to("cpu") if s.on_cpu else part.clone()
    if holder:
        return
    taken = fill(shape, received, dicts)
    for name, holder_object in state.items():
        holder_object.load_state_dict(taken[name])
