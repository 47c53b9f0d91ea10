"""Re-sharding in memory: the images of every rank of a group of `old_world` ranks (one step) made
into one rank's image for a smaller (or larger) group, as FSDP2 would have sharded the same
state over it. Used when a node is lost without a spare (`--nnodes=1:2`): the survivors hold
their own images and the copies of the lost node's ranks (`_copy_plan.Mesh`: the copy goes to
the next node), and go on at the new world size from the last completed step.

FSDP2 shards each parameter (and its optimizer state, a DTensor of the same placements) along
dim 0 over a 1-D mesh, rank r holding chunk r of `torch.chunk(full, world)` (empty chunks past
the end). So the full tensor is the old chunks laid end to end, and new rank k's piece is chunk
k of it over the new world: the bytes of the state do not change, only where they live. Every
other leaf is this process's own (replicated state is equal everywhere; a per-rank value stays
with the process that had it).

What this cannot re-shard is refused with the reason (`StateRefused`): a DTensor on a 2-D mesh
(HSDP, tensor parallel), sharded on another dim, or replicated.
"""
from . import _image
from ._state import StateRefused


def check(image, old_world):
    """Refuses, with the reason, an image whose DTensors are not FSDP2's Shard(0) over a 1-D mesh
    of `old_world` ranks."""
    for path, (_, meta) in _image.tensors(image).items():
        if meta is None:
            continue
        placements, _, _, mesh_shape, _ = meta
        names = [type(p).__name__ for p in placements]
        if (tuple(mesh_shape) != (old_world,) or len(placements) != 1
                or names[0] != "Shard" or getattr(placements[0], "dim", None) != 0):
            raise StateRefused(
                f"mxrun.run: '{'/'.join(str(p) for p in path)}' is a DTensor placed "
                f"{[str(p) for p in placements]} on a mesh of shape {tuple(mesh_shape)}; "
                "re-sharding to another world size in memory supports FSDP2's Shard(0) over a "
                "1-D mesh only (not HSDP, tensor parallel or another shard dim): the group "
                "restarts instead (from the script's checkpoint)")


def piece(full, rank, world):
    """Chunk `rank` of `full` over `world` ranks along dim 0, as FSDP2 shards (empty at the end)."""
    import torch
    chunks = list(torch.chunk(full, world, dim=0))
    while len(chunks) < world:
        chunks.append(full.new_empty((0,) + tuple(full.shape[1:])))
    return chunks[rank].clone()


def reshard(images, own, new_rank, new_world):
    """New rank `new_rank`'s image of `new_world` from `images` ({old rank: Image}, every rank of
    the old group, one step); `own` the old rank of this process (its own non-DTensor leaves)."""
    import torch
    old_world = len(images)
    if sorted(images) != list(range(old_world)):
        raise ValueError(f"re-sharding needs every old rank's image, got {sorted(images)}")
    check(images[own], old_world)
    locals_by_rank = [_image.tensors(images[r]) for r in range(old_world)]

    def replace(path, tensor, meta):
        if meta is None:
            return tensor, None
        placements, shape, stride, _, names = meta
        parts = []
        for r in range(old_world):
            found = locals_by_rank[r].get(path)
            if found is None:
                raise StateRefused(f"mxrun.run: rank {r}'s image lacks "
                                   f"'{'/'.join(str(p) for p in path)}': the ranks' states differ "
                                   "in structure, so they cannot be re-sharded")
            parts.append(found[0])
        full = torch.cat(parts, dim=0)
        if tuple(full.shape) != tuple(shape):
            raise StateRefused(f"mxrun.run: the shards of '{'/'.join(str(p) for p in path)}' "
                               f"make {tuple(full.shape)}, not its global shape {tuple(shape)}: "
                               "not FSDP2's even chunks, so they cannot be re-sharded")
        return piece(full, new_rank, new_world), (placements, shape, stride, (new_world,), names)

    return _image.rebuild(images[own], replace)
