"""Which entries of `mxrun.run`'s state are the group's and which are each rank's own: a pure plan.

At every round the ranks describe their state (`_state.describe`: for each leaf of the holders'
state_dicts its path, its kind, its shape and dtype, and a digest of its value) and every rank
computes the same plan from all the descriptions, so that all of them act alike (share, keep, or
refuse together: no rank is left waiting in a collective). A leaf is

- replicated: equal on every rank that holds the group's state (the most advanced ones, `holders`):
  broadcast from the source to every rank, as DDP's parameters and optimizer state;
- per-rank by value: the same shape and dtype, values that differ (BatchNorm statistics under DDP,
  a generator seeded by rank): each holder keeps its own; a rank that holds no state (a new
  process, a standby) takes the source's, with a warning naming them (its own died with the rank
  it replaces);
- per-rank by nature: a DTensor (FSDP2, HSDP, tensor parallel: its local shard), a leaf whose shape
  or dtype differs by rank, or one that was so in an earlier round (remembered: `known`): each
  holder keeps its own. A rank without state gets its own only from the copy `_shard_copy.py`
  keeps (a state function's jobs, `_shard_recovery.py`); here, without one, the round is refused,
  on every rank, with one message that says what was found.

Holders are told apart by their offers (the step they hold, from memory or a checkpoint): only
their values count as evidence, since a new process holds the script's fresh state.

Standard library only; tests need no processes.
"""

REPLICATED = "replicated"
PER_RANK_VALUE = "per-rank value"
PER_RANK = "per-rank"  # by nature: sharded, or a shape/dtype that differs by rank

TENSOR, DTENSOR, VALUE = "tensor", "dtensor", "value"


class Leaf:
    """One leaf of a rank's state: `path` a tuple of keys (the holder's name first), `kind` TENSOR,
    DTENSOR or VALUE, `meta` the shape and dtype (and placements for a DTensor) as text, `digest`
    its value's."""
    __slots__ = ("path", "kind", "meta", "digest")

    def __init__(self, path, kind, meta, digest):
        self.path, self.kind, self.meta, self.digest = tuple(path), kind, meta, digest

    def __repr__(self):
        return f"Leaf({self.path!r}, {self.kind!r}, {self.meta!r}, {self.digest!r})"

    def __reduce__(self):  # sent with all_gather_object
        return (Leaf, (self.path, self.kind, self.meta, self.digest))


class Plan:
    """`classes` {path: class} for every path of the source's state; `per_rank` the paths per-rank
    by nature (to remember); `error` the refusal (None: go on); `warning` a line to print (None)."""

    def __init__(self, classes, per_rank, error, warning, reasons):
        self.classes, self.per_rank, self.error, self.warning = classes, per_rank, error, warning
        self.reasons = reasons  # {path: why it is not replicated}

    def shared(self, path):
        """Whether the source sends this leaf (replicated, or a per-rank value for new ranks)."""
        return self.classes.get(tuple(path), REPLICATED) != PER_RANK

    def keeps_own(self, path, holder):
        """Whether a rank keeps its own value of the leaf (a holder, for a per-rank leaf)."""
        return holder and self.classes.get(tuple(path), REPLICATED) != REPLICATED


def name(path):
    """'model/layers.0.weight' for ('model', 'layers.0.weight')."""
    return "/".join(str(p) for p in path)


def _examples(paths, reasons, limit=3):
    shown = [f"'{name(p)}' ({reasons[p]})" for p in paths[:limit]]
    more = f" and {len(paths) - limit} more" if len(paths) > limit else ""
    return ", ".join(shown) + more


def plan(descriptions, holders, source, known=()):
    """The plan for a round. `descriptions[r]`: rank r's leaves (a list of Leaf); `holders`: the
    ranks that hold the group's state (the source among them); `known`: paths found per-rank by
    nature in an earlier round."""
    world = len(descriptions)
    holders = sorted(set(holders))
    if source not in holders:
        raise ValueError(f"the source rank {source} is not among the holders {holders}")
    by_rank = [{leaf.path: leaf for leaf in leaves} for leaves in descriptions]
    known = {tuple(p) for p in known}
    classes, reasons = {}, {}
    structure = []  # paths some holders have and others lack
    for path, leaf in by_rank[source].items():
        held = [by_rank[r].get(path) for r in holders]
        if any(other is None for other in held):
            structure.append(path)
            classes[path], reasons[path] = PER_RANK, "not on every rank"
        elif any(other.kind == DTENSOR for other in held):
            classes[path], reasons[path] = PER_RANK, f"a DTensor: {leaf.meta}"
        elif any(other.kind != leaf.kind or other.meta != leaf.meta for other in held):
            metas = sorted({f"{other.meta} on rank {r}" for r, other in zip(holders, held)})
            classes[path], reasons[path] = PER_RANK, "differs by rank: " + ", ".join(metas)
        elif path in known:
            classes[path], reasons[path] = PER_RANK, "per-rank in an earlier round"
        elif any(other.digest != leaf.digest for other in held):
            classes[path], reasons[path] = PER_RANK_VALUE, "its value differs by rank"
        else:
            classes[path] = REPLICATED
    for r in holders:  # a holder's leaves the source lacks
        for path in by_rank[r]:
            if path not in by_rank[source] and path not in structure:
                structure.append(path)
    per_rank = sorted((p for p, c in classes.items() if c == PER_RANK), key=name)
    by_value = sorted((p for p, c in classes.items() if c == PER_RANK_VALUE), key=name)
    newcomers = [r for r in range(world) if r not in holders]
    error = warning = None
    if structure:
        error = (f"mxrun.run: the ranks that hold the group's state ({_ranks(holders)}) differ "
                 "in its structure: "
                 f"{', '.join(repr(name(p)) for p in sorted(structure, key=name)[:3])}"
                 f"{' and more' if len(structure) > 3 else ''} not on every one of them; "
                 "supported: the same state_dict() keys on every rank")
    elif newcomers and per_rank:
        error = (f"mxrun.run: {_ranks(newcomers, 'rank')} take{'s' if len(newcomers) == 1 else ''} "
                 f"this round without the group's state (a new process or a standby), and "
                 f"{len(per_rank)} state entr{'y is' if len(per_rank) == 1 else 'ies are'} "
                 f"each rank's own: {_examples(per_rank, reasons)}. A new rank gets its own only "
                 "from the copy mxrun keeps of every rank's state when mxrun.run is given a "
                 "function that makes the state for each round (mxrun.run(train, build): mxrun's "
                 "docs/guide/your-script.md, 'Sharded state'), so the round is refused rather "
                 "than given another rank's; the group restarts instead (from the script's "
                 "checkpoint)")
    if error is None and newcomers and by_value:
        warning = (f"mxrun.run: {len(by_value)} state entr{'y' if len(by_value) == 1 else 'ies'} "
                   f"differ by rank in value ({_examples(by_value, reasons)}): each rank that "
                   f"holds the state keeps its own; {_ranks(newcomers, 'new rank')} take"
                   f"{'s' if len(newcomers) == 1 else ''} rank {source}'s")
    return Plan(classes, per_rank, error, warning, reasons)


def _ranks(ranks, word="rank"):
    ranks = list(ranks)
    return f"{word}{'s' if len(ranks) != 1 else ''} {', '.join(str(r) for r in ranks)}"
