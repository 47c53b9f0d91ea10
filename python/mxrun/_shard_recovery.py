"""A re-formed round of a job with sharded state: every rank gets its own state back from memory.

Each rank tells the others what it holds (`Previous`: its rank in the last round, the step it
completed, the images its copier keeps); `_copy_plan.restore_plan` names the step to go on from
and, for each rank, where its image of that step is: its own snapshot, or the copy its ring
neighbour keeps, or under HSDP its replica peer's own image (a rank that was lost: its standby
or new process gets it by broadcast from the keeper or the peer). Each rank then loads the image
into its objects, which the script made anew for this round on its new group
(`mxrun.run(train, build)`): an FSDP2 model re-wrapped, its optimizer.

At the same world size each surviving rank keeps its number (a standby or a new process takes a
lost rank's). At another (a node lost without a spare) the kept processes re-shard every rank's
image to the new mesh (`_reshard.py`). Anything else is refused with the reason, on every rank
alike.
"""
import sys

from . import _copy_plan, _image, _reshard
from ._state import StateRefused


class Previous:
    """What this process brings from the last round: its `rank` there of `world`, the step it
    `completed`, its `copier` (None: it kept no images), and that round's state `objects` (their
    live state is that step's)."""

    def __init__(self, rank, world, completed, copier, objects):
        self.rank, self.world, self.completed, self.copier = rank, world, completed, copier
        self.objects = objects

    def summary(self):
        live, own, copies = self.copier.holdings(self.completed)
        return {"rank": self.rank, "world": self.world, "live": live, "own": own,
                "copies": copies, "replicate": self.copier.replicate}


def warm_imports():
    """What FSDP2's first fully_shard imports lazily (torch._dynamo, through torch._compile's
    disable: 0.45-0.6 s on this machine's CPUs, seen as a standby's round waited on by every
    survivor), imported while the standby waits, when the script uses FSDP2 or DTensor. Nothing
    of the rank's is read at that import (a standby has no rank yet)."""
    if not any(m in sys.modules for m in ("torch.distributed.fsdp", "torch.distributed.tensor")):
        return
    try:
        import torch._dynamo  # noqa: F401
    except Exception as error:  # noqa: BLE001 - a warm-up only: the round imports it if it can
        print(f"mxrun: a standby could not import torch._dynamo ahead of its round: {error}",
              file=sys.stderr, flush=True)


def gather(previous, known):
    """Every rank's summary (None: a new process, or nothing kept) and the per-rank paths every
    rank has found so far."""
    import torch.distributed as dist
    mine = (previous.summary() if previous is not None and previous.copier is not None else None,
            sorted(known, key=lambda p: "/".join(map(str, p))))
    gathered = [None] * dist.get_world_size()
    dist.all_gather_object(gathered, mine)
    for _, theirs in gathered:
        known.update(tuple(p) for p in theirs)
    return [summary for summary, _ in gathered]


def sharded(summaries):
    """Whether the round goes through images (a survivor kept them)."""
    return any(s is not None for s in summaries)


def replicate(summaries):
    """The survivors' replica groups (`_shard_copy.mesh_of`, decided in the first round; a new
    process takes them from the survivors); None when no survivor kept images."""
    found = {s["replicate"] for s in summaries if s is not None}
    if len(found) > 1:
        raise StateRefused(f"mxrun.run: the kept ranks disagree on the mesh's replica groups "
                           f"({', '.join(str(r) for r in sorted(found))}): the group restarts")
    return found.pop() if found else None


class Plan:
    """`step` to go on from; `sources` {old rank: (kind, old rank that holds it)} for every rank
    of the last round (`old_world` of them); `new_rank_of` {old rank: its new rank} of the kept
    processes."""

    def __init__(self, step, sources, old_world, new_rank_of):
        self.step, self.sources = step, sources
        self.old_world, self.new_rank_of = old_world, new_rank_of


def plan(summaries, world):
    """The Plan for this round, or StateRefused: pure, the same on every rank."""
    survivors = {s["rank"]: s for s in summaries if s is not None}
    worlds = {s["world"] for s in survivors.values()}
    if len(worlds) != 1:
        raise StateRefused(f"mxrun.run: the kept ranks come from rounds of different world sizes "
                           f"({', '.join(str(w) for w in sorted(worlds))}): the group restarts")
    old_world = worlds.pop()
    new_rank_of = {s["rank"]: new for new, s in enumerate(summaries) if s is not None}
    if old_world == world:
        for old, new in new_rank_of.items():
            if old != new:
                raise StateRefused(
                    f"mxrun.run: rank {old} of the last round is rank {new} of this one; "
                    "sharded state comes back from memory at the same world size only when every "
                    "kept rank keeps its number: the group restarts instead")
    else:
        newcomers = [r for r, s in enumerate(summaries) if s is None]
        if newcomers:
            raise StateRefused(
                f"mxrun.run: the group re-formed at world size {world} from {old_world} with new "
                f"process(es) as rank(s) {', '.join(map(str, newcomers))}; re-sharding in memory "
                "takes only kept processes: the group restarts instead")
        if replicate(summaries) != 1:
            raise StateRefused(
                f"mxrun.run: the group re-formed at world size {world} from {old_world}; "
                "re-sharding HSDP's mesh in memory is not supported: the group restarts instead "
                "(from the script's checkpoint)")
    holdings = {r: _copy_plan.Holdings(s["live"], s["own"], s["copies"])
                for r, s in survivors.items()}
    mesh = _copy_plan.Mesh(old_world, replicate(summaries))
    restore = _copy_plan.restore_plan(mesh, holdings)
    if restore.error is not None:
        raise StateRefused(restore.error + "; the group restarts instead (from the script's "
                           "checkpoint)")
    return Plan(restore.step, restore.sources, old_world, new_rank_of)


def _sent(previous, kind, step, rank):
    """The image this rank sends for a source of `kind`: its copy, or its own; None when it has
    none (`_broadcast` then has every rank refuse)."""
    if kind == _copy_plan.COPY:
        return previous.copier.copy(step)
    try:
        return _own_image(previous, step, rank)
    except StateRefused:
        return None


def restore(summaries, previous, state, rank, device=None):
    """Loads this rank's image of the agreed step into `state`'s objects; returns the step. Every
    rank calls it (the keepers broadcast the lost ranks' images). At another world size (a node
    lost without a spare) every old rank's image goes to every rank, which re-shards them
    (`_reshard.py`)."""
    import torch.distributed as dist
    world = dist.get_world_size()
    p = plan(summaries, world)
    step = p.step
    if p.old_world != world:
        images = {}
        for old in range(p.old_world):
            kind, holder = p.sources[old]
            sender = p.new_rank_of[holder]
            images[old] = _broadcast(_sent(previous, kind, step, rank) if rank == sender else None,
                                     sender, receive=True, device=device)
        _image.load(_reshard.reshard(images, summaries[rank]["rank"], rank, world), state, device)
        return step
    for target in sorted(p.sources):
        kind, holder = p.sources[target]
        if kind in (_copy_plan.COPY, _copy_plan.REPLICA):
            image = _broadcast(_sent(previous, kind, step, rank) if rank == holder else None,
                               holder, receive=rank == target, device=device)
            if rank == target:
                _image.load(image, state, device)
    kind, _ = p.sources[rank]
    if kind in (_copy_plan.LIVE, _copy_plan.SNAPSHOT):
        _image.load(_own_image(previous, step, rank), state, device)
    return step


def _own_image(previous, step, rank):
    """This rank's own image of `step`: its snapshot, else (a step between copies) its live
    state when that is the step's."""
    image = previous.copier.own(step)
    if image is None and previous.completed == step:
        image = _image.take({n: o.state_dict() for n, o in previous.objects.items()})
    if image is None:
        raise StateRefused(f"mxrun.run: rank {rank} holds no image of step {step}")
    return image


def _broadcast(image, source, receive, device=None):
    """`image` from `source` to every rank; an Image where `receive`, else None. `device`: where
    the group's collectives run (this rank's GPU with NCCL; None: the CPU, Gloo); the image
    stays in host memory."""
    import torch
    import torch.distributed as dist
    missing = dist.get_rank() == source and image is None
    # A missing image is said to every rank, which all refuse alike (none left in a broadcast).
    payload = [("missing", None) if missing else
               ("image", _image.to_bytes(image)) if image is not None else None]
    dist.broadcast_object_list(payload, src=source, device=device)
    what, data = payload[0]
    if what == "missing":
        raise StateRefused(f"mxrun.run: rank {source} holds no copy of the image it was to send")
    structure, layout = _image.from_bytes(data)
    flats = {}
    for dtype, numel in layout:
        flat = image.flats[dtype] if image is not None else torch.empty(numel, dtype=dtype)
        if device is not None:
            moved = flat.to(device)
            dist.broadcast(moved, src=source)
            flat = moved.cpu() if image is None else flat
        else:
            dist.broadcast(flat, src=source)
        flats[dtype] = flat
    return _image.Image(structure, flats) if receive else None
