"""A rank's whole state at one step as a self-contained image: taken in host memory, sent to another
rank, and loaded into the objects of a later round (which may be new: a re-wrapped FSDP2 model
and its optimizer, on the round's new group).

`take(dicts)` copies every tensor of a rank's {name: state_dict()} into one flat buffer per dtype
on the CPU (a DTensor by its local shard, with its placements and global shape); the rest stays
as it is in the structure. From a GPU the copies go into pinned memory without blocking, in the
stream's order: `take` returns while they run, and reading the image's buffers waits for them.
`load(image, state)` rebuilds the state_dicts (each DTensor from its shard on the mesh of the
same shape found among the round's objects, the shard bytes unchanged) and loads them into
`state`'s objects: the state comes back bit for bit. `to_bytes`/`from_bytes` carry the
structure; the flat buffers go as tensors.
"""
import pickle


class _Local:
    """A tensor in the structure: its place in its dtype's flat buffer; for a DTensor, how to make
    it again."""
    __slots__ = ("dtype", "shape", "offset", "dtensor")

    def __init__(self, dtype, shape, offset, dtensor=None):
        self.dtype, self.shape, self.offset, self.dtensor = dtype, shape, offset, dtensor

    def __reduce__(self):
        return (_Local, (self.dtype, self.shape, self.offset, self.dtensor))


class Image:
    """`structure`: the state_dicts, a _Local for each tensor; `flats`: {dtype: 1-D CPU tensor}.
    `events`: the CUDA events after which copies from a GPU into `flats` are done (none on the
    CPU); reading `flats` waits for them, so nothing sees a buffer still being filled."""
    __slots__ = ("structure", "_flats", "_events")

    def __init__(self, structure, flats, events=()):
        self.structure, self._flats, self._events = structure, flats, list(events)

    @property
    def flats(self):
        if self._events:
            _wait_for(self._events)
            self._events = []
        return self._flats

    def nbytes(self):
        return sum(f.numel() * f.element_size() for f in self.flats.values())


COPY_TIMEOUT = 60.0  # seconds: a step's copy to the host takes milliseconds to a second


def _wait_for(events):
    """Waits for the copies' CUDA events, at most COPY_TIMEOUT (a GPU that stopped answering
    would otherwise hold the exchange or a recovery for ever)."""
    import time
    deadline = time.monotonic() + COPY_TIMEOUT
    for event in events:
        while not event.query():
            if time.monotonic() > deadline:
                raise TimeoutError(f"the copy of a step's state from the GPU to the host did not "
                                   f"end within {COPY_TIMEOUT:g} s")
            time.sleep(0.001)


def _dtensor_class():
    try:
        from torch.distributed.tensor import DTensor
    except ImportError:
        return None
    return DTensor


def take(dicts, reuse=None):
    """The image of `dicts` ({name: state_dict()}), copied now (later changes do not reach it).
    `reuse`: an image no longer needed whose buffers are written over when their dtypes and sizes
    fit (each step's image is the same size: no new host memory, no page faults)."""
    import torch
    dtensor = _dtensor_class()
    parts = {}  # dtype -> [tensor]
    sizes = {}

    def strip(value):
        if isinstance(value, torch.Tensor):
            if dtensor is not None and isinstance(value, dtensor):
                # Its local shard as it is: to_local() goes through autograd for each tensor.
                local = getattr(value, "_local_tensor", None)
                if local is None:
                    local = value.to_local()
                mesh = value.device_mesh
                meta = (tuple(value.placements), tuple(value.shape), tuple(value.stride()),
                        tuple(mesh.shape), mesh.mesh_dim_names)
                return place(local, meta)
            return place(value, None)
        if isinstance(value, dict):
            return type(value)((k, strip(v)) for k, v in value.items())
        if isinstance(value, (list, tuple)):
            return type(value)(strip(v) for v in value)
        return value

    def place(tensor, meta):
        offset = sizes.get(tensor.dtype, 0)
        parts.setdefault(tensor.dtype, []).append(tensor.detach().reshape(-1))
        sizes[tensor.dtype] = offset + tensor.numel()
        return _Local(tensor.dtype, tuple(tensor.shape), offset, meta)

    structure = strip(dicts)
    old = reuse.flats if reuse is not None else {}
    flats, devices = {}, set()
    with torch.no_grad():
        for dtype, tensors in parts.items():
            buffer = old.get(dtype)
            fits = buffer is not None and buffer.numel() == sizes[dtype] and buffer.dtype == dtype
            on_gpu = [t.device for t in tensors if t.device.type == "cuda"]
            if not on_gpu:
                flats[dtype] = torch.cat(tensors, out=buffer) if fits else torch.cat(tensors)
                continue
            # From the GPU: each tensor copied without waiting into pinned host memory, in the
            # stream's order (after the step's last kernel, before the next step's), so the
            # training loop goes on queueing work; the CUDA events say when the copies are done.
            if not (fits and buffer.is_pinned()):
                buffer = torch.empty(sizes[dtype], dtype=dtype, pin_memory=True)
            offset = 0
            for t in tensors:
                buffer[offset:offset + t.numel()].copy_(t, non_blocking=True)
                offset += t.numel()
            flats[dtype] = buffer
            devices.update(on_gpu)
    events = []
    for device in devices:
        event = torch.cuda.Event()
        event.record(torch.cuda.current_stream(device))
        events.append(event)
    return Image(structure, flats, events)


def _meshes(state):
    """{(mesh shape, dim names): mesh} of the DTensors in `state`'s objects now."""
    dtensor = _dtensor_class()
    found = {}
    if dtensor is None:
        return found

    def walk(value):
        if isinstance(value, dtensor):
            mesh = value.device_mesh
            found.setdefault((tuple(mesh.shape), mesh.mesh_dim_names), mesh)
        elif isinstance(value, dict):
            for v in value.values():
                walk(v)
        elif isinstance(value, (list, tuple)):
            for v in value:
                walk(v)
    for holder in state.values():
        if hasattr(holder, "parameters"):  # a module: its parameters, without a state_dict copy
            for p in holder.parameters():
                walk(p)
        else:
            walk(holder.state_dict())
    return found


def load(image, state, device=None):
    """Loads `image` into `state` ({name: object with load_state_dict()}). A tensor goes back to
    `device` when given (the rank's GPU), else to the CPU."""
    from torch.distributed.tensor import DTensor
    meshes = _meshes(state) if _has_dtensors(image.structure) else {}

    def fill(value):
        if isinstance(value, _Local):
            flat = image.flats[value.dtype]
            count = 1
            for n in value.shape:
                count *= n
            tensor = flat[value.offset:value.offset + count].view(value.shape).clone()
            if device is not None:
                tensor = tensor.to(device)
            if value.dtensor is None:
                return tensor
            placements, shape, stride, mesh_shape, names = value.dtensor
            mesh = meshes.get((mesh_shape, names))
            if mesh is None:
                raise ValueError(f"no mesh of shape {mesh_shape} (dims {names}) among the round's "
                                 f"objects for a DTensor of the image (placements {placements})")
            return DTensor.from_local(tensor, mesh, placements, run_check=False, shape=shape,
                                      stride=stride)
        if isinstance(value, dict):
            return type(value)((k, fill(v)) for k, v in value.items())
        if isinstance(value, (list, tuple)):
            return type(value)(fill(v) for v in value)
        return value

    dicts = fill(image.structure)
    for name, holder in state.items():
        holder.load_state_dict(dicts[name])


def _has_dtensors(value):
    if isinstance(value, _Local):
        return value.dtensor is not None
    if isinstance(value, dict):
        return any(_has_dtensors(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return any(_has_dtensors(v) for v in value)
    return False


def tensors(image):
    """{path: (tensor, dtensor meta or None)} of every tensor in `image` (views of its buffers);
    a path is the tuple of keys from the top of the structure."""
    found = {}

    def walk(value, path):
        if isinstance(value, _Local):
            count = 1
            for n in value.shape:
                count *= n
            flat = image.flats[value.dtype]
            found[path] = (flat[value.offset:value.offset + count].view(value.shape),
                           value.dtensor)
        elif isinstance(value, dict):
            for k, v in value.items():
                walk(v, path + (k,))
        elif isinstance(value, (list, tuple)):
            for i, v in enumerate(value):
                walk(v, path + (i,))
    walk(image.structure, ())
    return found


def rebuild(image, replace):
    """A new image with `image`'s structure, each tensor replaced by `replace(path, tensor,
    meta)` -> (tensor, meta) (a re-sharded piece and its new DTensor meta, say)."""
    import torch
    parts, sizes = {}, {}

    def walk(value, path):
        if isinstance(value, _Local):
            count = 1
            for n in value.shape:
                count *= n
            old = image.flats[value.dtype][value.offset:value.offset + count].view(value.shape)
            tensor, meta = replace(path, old, value.dtensor)
            offset = sizes.get(tensor.dtype, 0)
            parts.setdefault(tensor.dtype, []).append(tensor.reshape(-1))
            sizes[tensor.dtype] = offset + tensor.numel()
            return _Local(tensor.dtype, tuple(tensor.shape), offset, meta)
        if isinstance(value, dict):
            return type(value)((k, walk(v, path + (k,))) for k, v in value.items())
        if isinstance(value, (list, tuple)):
            return type(value)(walk(v, path + (i,)) for i, v in enumerate(value))
        return value
    structure = walk(image.structure, ())
    return Image(structure, {dtype: torch.cat(ts) for dtype, ts in parts.items()})


def to_bytes(image):
    """The structure and the flat buffers' dtypes and sizes, for a receiver to make its buffers."""
    layout = [(dtype, flat.numel())
              for dtype, flat in sorted(image.flats.items(), key=lambda item: str(item[0]))]
    return pickle.dumps((image.structure, layout), protocol=4)


def from_bytes(data):
    """(structure, [(dtype, numel)]) from to_bytes."""
    return pickle.loads(data)
