"""The redundant copy of sharded state: at each completed step a rank's image (`_image.py`: its
shards, their optimizer state, the rest of its state) goes to the rank that keeps its copy (the
ring neighbour, `_copy_plan.Mesh`), and the image of the rank it keeps arrives, off the training
loop's path. HSDP (`mesh_of`: every per-rank entry a DTensor replicated over the first dimension
of a 2-D mesh) keeps no copy: a lost rank's shards are its replica peers' own; each rank still
snapshots its own image at each completed step (peers may stop a step apart).

`completed(step, dicts)` takes the image (one copy of the state into host memory: the snapshot;
from a GPU, queued into pinned memory without waiting, and the exchange waits for it), then
hands its sending and the neighbour's receiving to a thread of its own on a Gloo group of its
own, and returns; the next `completed` first waits for that exchange (it has had a whole step to
finish). Two generations are kept of each (this rank's images and the neighbour's): a survivor
may have completed one step more than the lost rank sent (`_copy_plan.py`). Memory: 4 images of
about one rank's state each, in host memory.

Every wait is bounded: the exchange's group has a timeout, and leaving the round shuts its
connections (`_groups.abandon_group`), which ends a receive from a peer that will never send.
"""
import threading
from datetime import timedelta

from . import _image

GENERATIONS = 2
TIMEOUT = timedelta(seconds=60)  # one exchange on a live group takes milliseconds to seconds
JOIN_TIMEOUT = 30.0  # the previous exchange, waited for at the next completed step or a round


class ShardCopier:
    """One round's copier: `group` (Gloo, every rank of the round), this `rank` of `world`, images
    sent to `keeper` and received from `source` (None: no copy, a world of one)."""

    def __init__(self, group, rank, keeper, source, every=1, replicate=1):
        self._group, self.rank, self.replicate = group, rank, replicate
        self._keeper, self._source, self._every = keeper, source, every
        self._own = {}     # step -> Image: this rank's snapshots
        self._copies = {}  # step -> Image: the source's images received
        self._thread = None
        self._error = None
        self.sent_bytes = 0
        self.seconds = []  # each exchange's time (for the benchmark)

    def completed(self, step, dicts):
        """Step `step` is complete and `dicts()` ({name: state_dict()}) is the state after it
        (called only when this step is copied)."""
        if step % self._every:
            return
        if not self.wait(JOIN_TIMEOUT) and self._error is None:
            # Never two exchanges at once on the group: copying stops, and a later loss goes
            # back to the last step every rank's image holds (or is refused), never wrong.
            self._error = TimeoutError(f"the exchange before step {step} is still running "
                                       f"after {JOIN_TIMEOUT:g} s")
        # The oldest snapshot gives its buffers (none is in flight: the exchange has ended).
        image = _image.take(dicts(), reuse=_oldest_out(self._own))
        self._own[step] = image
        if self._keeper is None or self._error is not None:
            return
        self._thread = threading.Thread(target=self._exchange, args=(step, image),
                                        name="mxrun-shard-copy", daemon=True)
        self._thread.start()

    def wait(self, timeout):
        """Waits up to `timeout` s for the exchange in flight; False when it is still running."""
        thread = self._thread
        if thread is None:
            return True
        thread.join(timeout)
        if thread.is_alive():
            return False
        self._thread = None
        return True

    def _exchange(self, step, image):
        import time
        import torch
        import torch.distributed as dist
        began = time.monotonic()
        try:
            raw = _image.to_bytes(image)
            header = torch.tensor([len(raw), step], dtype=torch.int64)
            data = torch.frombuffer(bytearray(raw), dtype=torch.uint8)
            flats = [f for _, f in sorted(image.flats.items(), key=lambda i: str(i[0]))]
            sends = [dist.isend(t, self._keeper, group=self._group, tag=i)
                     for i, t in enumerate([header, data] + flats)]
            got = torch.empty(2, dtype=torch.int64)
            dist.recv(got, self._source, group=self._group, tag=0)
            incoming = torch.empty(int(got[0]), dtype=torch.uint8)
            dist.recv(incoming, self._source, group=self._group, tag=1)
            structure, layout = _image.from_bytes(incoming.numpy().tobytes())
            received = {}
            old = _oldest_out(self._copies)
            old = old.flats if old is not None else {}
            for i, (dtype, numel) in enumerate(layout):
                buffer = old.get(dtype)
                if buffer is None or buffer.numel() != numel:
                    buffer = torch.empty(numel, dtype=dtype)
                dist.recv(buffer, self._source, group=self._group, tag=2 + i)
                received[dtype] = buffer
            for work in sends:
                work.wait()
            self._copies[int(got[1])] = _image.Image(structure, received)
            self.sent_bytes += image.nbytes() + len(raw)
            self.seconds.append(time.monotonic() - began)
        except Exception as error:  # noqa: BLE001 - a peer gone: the round that follows says so
            self._error = error

    def holdings(self, live):
        """What this rank holds for `_copy_plan.Holdings`: (live, own steps, {source: steps})."""
        copies = {self._source: sorted(self._copies)} if self._source is not None else {}
        return live, sorted(self._own), copies

    def own(self, step):
        return self._own.get(step)

    def copy(self, step):
        return self._copies.get(step)

    def memory_bytes(self):
        return sum(i.nbytes() for i in list(self._own.values()) + list(self._copies.values()))

    def summary(self):
        """One line on what the copy cost this round (printed as a round ends)."""
        times = sorted(self.seconds)
        median = times[len(times) // 2] * 1000 if times else 0.0
        each = self.sent_bytes / len(times) / 1e6 if times else 0.0
        if self.replicate > 1:
            return (f"mxrun: rank {self.rank}: shard copy: none kept (HSDP: {self.replicate} "
                    f"replica groups hold each shard); {self.memory_bytes() / 1e6:.2f} MB held in "
                    f"host memory (this rank's last {GENERATIONS} snapshots)")
        return (f"mxrun: rank {self.rank}: shard copy: {len(times)} exchanges (every "
                f"{self._every} step(s)), {each:.2f} MB each, median {median:.1f} ms off the "
                f"loop's path; {self.memory_bytes() / 1e6:.2f} MB held in host memory (this rank's "
                f"last {GENERATIONS} images and its neighbour's)")


def _oldest_out(images):
    """Makes room for one more generation: the images beyond the last GENERATIONS - 1 are
    dropped; returns the newest of those dropped (its buffers may be reused), or None."""
    dropped = None
    for step in sorted(images)[:max(0, len(images) - GENERATIONS + 1)]:
        dropped = images.pop(step)
    return dropped


def mesh_of(dicts, known, by_value, world):
    """The `_copy_plan.Mesh` of a rank's state `dicts` ({name: state_dict()}): HSDP's (replicate,
    shard) when every per-rank entry (`known`) is a DTensor replicated over the first dimension of
    one 2-D mesh whose ranks are laid out row by row, and no entry differs by rank in value
    (`by_value`: a replica peer's value would not be the lost rank's); else the 1-D ring, which
    copies each rank's whole image and fits any layout (tensor parallel too)."""
    from . import _copy_plan
    ring = _copy_plan.Mesh(world)
    try:
        from torch.distributed.tensor import DTensor, Replicate
    except ImportError:
        return ring
    if by_value or not known:
        return ring
    layouts = set()
    for path in known:
        value = dicts
        for key in path:
            if not isinstance(value, (dict, list, tuple)):
                return ring
            try:
                value = value[key]
            except (KeyError, IndexError, TypeError):
                return ring
        if not isinstance(value, DTensor):
            return ring
        mesh = value.device_mesh
        if mesh.ndim != 2 or not isinstance(value.placements[0], Replicate):
            return ring
        layouts.add((tuple(mesh.shape), tuple(mesh.mesh.flatten().tolist())))
    if len(layouts) != 1:
        return ring
    (replicate, _), ranks = layouts.pop()
    if replicate < 2 or ranks != tuple(range(world)):
        return ring
    return _copy_plan.Mesh(world, replicate)


def start(known, rebuildable, replicate, objects, by_value, every=None):
    """The round's copier when its state has per-rank entries by nature (`known`, the same on
    every rank, so that every rank makes the copy group or none does) and its objects are made
    anew each round (`rebuildable`: else a lost rank cannot be restored in-process anyway);
    None otherwise. `replicate`: the mesh's replica groups as the survivors kept them (1: the
    ring copy; more: HSDP, no copy), or None in a round agreed anew: then `mesh_of(objects' state,
    known, by_value)` says, the same on every rank. `every`: copy every K completed steps
    (default MXRUN_SHARD_COPY_EVERY, else 1); a failure then redoes up to K - 1 steps."""
    import os
    import torch.distributed as dist
    from . import _copy_plan, _groups
    if not known or not rebuildable:
        return None
    if every is None:
        text = os.environ.get("MXRUN_SHARD_COPY_EVERY", "1")
        if not text.isdigit() or int(text) < 1:
            raise ValueError(f"MXRUN_SHARD_COPY_EVERY={text!r}: expected a whole number >= 1")
        every = int(text)
    rank, world = dist.get_rank(), dist.get_world_size()
    if replicate is None:
        dicts = {n: o.state_dict() for n, o in objects.items()}
        replicate = mesh_of(dicts, known, by_value, world).replicate
    per_node = os.environ.get("LOCAL_WORLD_SIZE", "")
    mesh = _copy_plan.Mesh(world, replicate, int(per_node) if per_node.isdigit() and
                           int(per_node) > 0 else None)
    keeper, source = mesh.copy_keeper(rank), mesh.copied_from(rank)
    group = None
    if keeper is not None:
        group = _groups.subgroup(lambda: dist.new_group(backend="gloo", timeout=TIMEOUT))
    return ShardCopier(group, rank, keeper, source, every, replicate)
