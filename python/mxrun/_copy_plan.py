"""Who keeps a redundant copy of whose shards, and where each rank's state comes from after a loss:
a pure plan over the mesh and the membership change (no torch, no processes; tests drive it).

Sharded state (FSDP2's DTensor shards, with their optimizer state) exists once per shard: a lost
rank's shards are lost with it unless another rank keeps them. The shape of the mesh decides:

- a 1-D mesh (FSDP2 over all ranks): rank r's shards are copied to its ring neighbour on the
  next node, rank (r + per_node) % world (on one node: rank (r + 1) % world), at each completed
  step (the copier, `_shard_copy.py`, moves the bytes): a node lost whole leaves every one of its
  ranks' copies on the others;
- HSDP, a (replicate, shard) mesh, rank = i * shard + j: the ranks (i', j) of the other replica
  groups hold the same shards already; no extra copy is kept.

After a failure each surviving rank says what it holds (`Holdings`): its live state's step (the
last one it completed), the steps of its own snapshots (taken at each completed step: the live
state may be one step past a lost rank's last copy), and the steps of the copies it keeps of
other ranks. `restore_plan` finds the newest step at which every rank's state exists somewhere
and says, for each rank of the re-formed group (same world size: a standby or a new process takes
a lost rank's place), where it comes from. None found (two ring neighbours lost together, every
replica of a shard lost) is a refusal, with the reason.
"""

LIVE, SNAPSHOT, COPY, REPLICA = "live", "snapshot", "copy", "replica"


class Mesh:
    """`world` ranks as `replicate` groups of `world // replicate` shards (1: plain FSDP2), on
    nodes of `per_node` ranks each (None or one node: the ring steps by one rank)."""

    def __init__(self, world, replicate=1, per_node=None):
        if type(world) is not int or world < 1:
            raise ValueError(f"a mesh needs a world size >= 1, got {world!r}")
        if type(replicate) is not int or replicate < 1 or world % replicate:
            raise ValueError(f"replicate={replicate!r} does not divide the world size {world}")
        if per_node is not None and (type(per_node) is not int or per_node < 1):
            raise ValueError(f"per_node={per_node!r}: expected a whole number >= 1")
        self.world, self.replicate, self.shard = world, replicate, world // replicate
        spread = per_node is not None and per_node < world and world % per_node == 0
        self._stride = per_node if spread else 1

    def copy_keeper(self, rank):
        """The rank that keeps a redundant copy of `rank`'s shards, or None (HSDP: its replicas
        hold them; a world of 1: nobody else)."""
        if self.replicate > 1 or self.world == 1:
            return None
        return (rank + self._stride) % self.world

    def copied_from(self, rank):
        """The rank whose shards `rank` keeps a copy of, or None."""
        if self.replicate > 1 or self.world == 1:
            return None
        return (rank - self._stride) % self.world

    def replicas(self, rank):
        """The other ranks that hold `rank`'s shards (its peers in the other replica groups)."""
        j = rank % self.shard
        return [i * self.shard + j for i in range(self.replicate) if i * self.shard + j != rank]


class Holdings:
    """What a surviving rank holds: `live` its live state's step, `snapshots` the steps of its own
    snapshots, `copies` {rank: steps} of the copies it keeps of other ranks."""

    def __init__(self, live, snapshots=(), copies=None):
        self.live, self.snapshots = live, set(snapshots)
        self.copies = {r: set(steps) for r, steps in (copies or {}).items()}

    def own_steps(self):
        return {self.live} | self.snapshots


class Restore:
    """`step` the step the group goes on from; `sources` {rank: (kind, from_rank)}: LIVE (its own
    live state), SNAPSHOT (its own snapshot of that step), COPY (the copy `from_rank` keeps),
    REPLICA (`from_rank`'s own state, a replica of its shards); `error` the refusal, else None."""

    def __init__(self, step, sources, error=None):
        self.step, self.sources, self.error = step, sources, error


def _where(mesh, rank, step, holdings):
    """Where `rank`'s state at `step` is, or None: its own first, then a copy, then a replica."""
    own = holdings.get(rank)
    if own is not None:
        if own.live == step:
            return (LIVE, rank)
        if step in own.snapshots:
            return (SNAPSHOT, rank)
    for keeper, held in sorted(holdings.items()):
        if keeper != rank and step in held.copies.get(rank, ()):
            return (COPY, keeper)
    for peer in mesh.replicas(rank):
        if peer in holdings and step in holdings[peer].own_steps():
            return (REPLICA, peer)
    return None


def restore_plan(mesh, holdings):
    """The plan for a re-formed group of `mesh.world` ranks; `holdings` {surviving rank:
    Holdings}. Lost ranks are those without holdings."""
    for rank in holdings:
        if not 0 <= rank < mesh.world:
            raise ValueError(f"rank {rank} is outside the world of {mesh.world}")
    lost = [r for r in range(mesh.world) if r not in holdings]
    if not holdings:
        return Restore(None, {}, "mxrun: every rank was lost: nothing in memory to go on from")
    candidates = set()
    for held in holdings.values():
        candidates |= held.own_steps()
        for steps in held.copies.values():
            candidates |= steps
    for step in sorted(candidates, reverse=True):
        sources = {r: _where(mesh, r, step, holdings) for r in range(mesh.world)}
        if all(source is not None for source in sources.values()):
            return Restore(step, sources)
    return Restore(None, {}, _why_not(mesh, lost))


def _why_not(mesh, lost):
    if mesh.replicate > 1:
        what = ("every replica of some shards was lost (HSDP keeps no copy beyond its replica "
                "groups)")
    elif mesh.world == 1:
        what = "the only rank was lost"
    else:
        pairs = [r for r in lost if mesh.copy_keeper(r) in lost]
        what = (f"rank {pairs[0]} and rank {mesh.copy_keeper(pairs[0])}, which kept its copy, were "
                "lost together" if pairs else
                "no step is held for every rank (copies and snapshots of different steps)")
    return (f"mxrun: the lost rank(s) {', '.join(str(r) for r in lost)} cannot be restored from "
            f"memory: {what}")
