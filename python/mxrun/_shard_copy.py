"""The redundant copy of sharded state: at each completed step a rank's image (`_image.py`: its
shards, their optimizer state, the rest of its state) goes to the rank that keeps its copy (the
ring neighbour, `_copy_plan.Mesh`), and the image of the rank it keeps arrives, off the training
loop's path.

`completed(step, dicts)` takes the image (one copy of the state into host memory: the snapshot),
then hands its sending and the neighbour's receiving to a thread of its own on a Gloo group of its
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

    def __init__(self, group, rank, keeper, source, every=1):
        self._group, self.rank = group, rank
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
        image = _image.take(dicts())
        self._own[step] = image
        _trim(self._own)
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
            for i, (dtype, numel) in enumerate(layout):
                buffer = torch.empty(numel, dtype=dtype)
                dist.recv(buffer, self._source, group=self._group, tag=2 + i)
                received[dtype] = buffer
            for work in sends:
                work.wait()
            self._copies[int(got[1])] = _image.Image(structure, received)
            _trim(self._copies)
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
        return (f"mxrun: rank {self.rank}: shard copy: {len(times)} exchanges (every "
                f"{self._every} step(s)), {each:.2f} MB each, median {median:.1f} ms off the "
                f"loop's path; {self.memory_bytes() / 1e6:.2f} MB held in host memory (this rank's "
                f"last {GENERATIONS} images and its neighbour's)")


def _trim(images):
    for step in sorted(images)[:-GENERATIONS]:
        del images[step]


def start(known, rebuildable, every=None):
    """The round's copier when its state has per-rank entries by nature (`known`, the same on
    every rank, so that every rank makes the copy group or none does) and its objects are made
    anew each round (`rebuildable`: else a lost rank cannot be restored in-process anyway);
    None otherwise. `every`: copy every K completed steps (default MXRUN_SHARD_COPY_EVERY, else
    1); a failure then redoes up to K - 1 steps."""
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
    mesh = _copy_plan.Mesh(world)
    group = _groups.subgroup(lambda: dist.new_group(backend="gloo", timeout=TIMEOUT))
    return ShardCopier(group, rank, mesh.copy_keeper(rank), mesh.copied_from(rank), every)
