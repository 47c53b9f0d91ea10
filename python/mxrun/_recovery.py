"""In-process recovery for an ordinary PyTorch training loop: `mxrun.run(train, state)`.

    def train(ctx):                        # one call per round of the group
        ddp = DDP(model)                   # made anew: the old one belongs to the old group
        for step in range(ctx.step + 1, steps + 1):
            loss = ...; optimizer.zero_grad(); loss.backward(); optimizer.step()
            ctx.step_done(step)            # the step's last call (it may leave for a new round)

    mxrun.run(train, {"model": model, "optimizer": optimizer})

Under mxrun (its control channel offered) the worker tells the agent it takes re-formed groups
in-process. When a peer fails, the collective in flight raises (Gloo at once, when the peer's
connection closes); the agent keeps the survivors, re-forms the group and sends each its new
round. `run` then takes the round's environment and joins the round's group (`_groups.py`: by
default the broken group is abandoned and a new one made on a store of the round's own at
MASTER_ADDR:MASTER_PORT, which mxrun's agent hosts (or, with --workers_store=rank0, the new rank 0,
as env:// does); with PyTorch 2.14's `_reconfigure`,
asked for, the survivors keep their group and it is re-formed in place), agrees on the
state (each rank offers the step it holds: survivors from memory, a new process from the
`start_step` its own checkpoint gave; the most advanced ranks hold the group's state and keep
theirs, the lowest of them is the source, and the ranks that hold none load its state_dicts'
replicated entries, broadcast; entries that differ by rank are each holder's own, and a new rank
that would need another's shards is refused on every rank: `_classify.py`) and calls `train`
again from the agreed step. Only the failed ranks get new processes; no completed step is lost.
A warm standby (`--standby_workers`, started with MXRUN_STANDBY=1) runs the script's setup, waits
in `run` for a rank, and joins like a new process.

Sharded state (FSDP2) lives on its group: hand `run` a function that makes the state for each
round instead of the dict (`mxrun.run(train, build)`); every rank's image then goes to its ring
neighbour's memory at each completed step, and a lost rank's image comes back from there
(`_shard_recovery.py`).

Without mxrun (torchrun, or no launcher) `run` joins the group if the script has not, calls
`train` once from `start_step`, and leaves the group: the same script runs anywhere.
"""
import os
import sys
import time

from . import (_buffers, _channel, _classify, _flight_recorder, _groups, _nccl, _progress,
               _rounds, _shard_copy, _shard_recovery, _state)
from ._rounds import RoundPending

NOTICE_WAIT = 15.0  # after a collective failed: how long a round notice may take (a lease is 5 s)


class Context:
    """What `train` gets: where to go on from, and the step report."""

    def __init__(self, step, rank, world_size, round_, restored_from, joined=None, listener=None,
                 snapshot=None, state=None, copier=None):
        self.step = step  # the last completed step the group agreed on (0: none)
        self.state = state  # {name: object}: the state (made for this round by a state function)
        self._copier = copier  # the redundant copy of sharded state (None: none kept)
        self.rank = rank
        self.world_size = world_size
        self.round = round_
        self.restored_from = restored_from  # "memory", "checkpoint" or "none"
        self._joined = joined  # tells the agent once per round that this rank trains
        self._listener = listener  # the round notices (None without mxrun)
        self._snapshot = snapshot  # the buffers at the last completed step (None without mxrun)
        self.completed = step

    def step_done(self, step):
        """Step `step` is complete: progress for mxrun, and the safe point where a re-formed
        group is taken. Make it the step's last call, after its logging and checkpointing: when
        a new round is pending (a node joined or left) it raises RoundPending, which leaves
        `train` for the round, and what follows it in the step does not run."""
        self.completed = step
        if self._snapshot is not None:
            self._snapshot.take()
        if self._copier is not None:
            self._copier.completed(step, lambda: {n: o.state_dict() for n, o in self.state.items()})
        _progress.step_done(step)
        if self._joined is not None:
            self._joined()
            self._joined = None
        if self._listener is not None and self._listener.pending():
            raise RoundPending()


def _dist():
    import torch.distributed as dist  # only where used: the package never imports torch itself
    return dist


def _agree(state, offer_step, in_memory, known=None, by_value=None):
    """The group's state: the most advanced ranks (the holders) keep theirs; the others load the
    source's shared leaves (`_classify.py` says which; per-rank state a new rank cannot get is
    refused on every rank alike). `known`: the paths found per-rank in earlier rounds, updated;
    `by_value`: the paths found per-rank by value, updated. Returns (step, whether it came from
    memory)."""
    import torch
    dist = _dist()
    rank, world = dist.get_rank(), dist.get_world_size()
    # NCCL reduces only GPU tensors: the offers go on this rank's current device there.
    device = "cuda" if _nccl.uses_nccl(dist.get_backend()) else "cpu"
    offers = torch.zeros(world, dtype=torch.int64, device=device)
    offers[rank] = (offer_step + 1) * 2 + (1 if in_memory else 0)
    dist.all_reduce(offers)
    source = int(torch.argmax(offers))  # the first of the largest: the lowest rank on ties
    best = int(offers[source])
    holders = [r for r in range(world) if int(offers[r]) == best]
    step, from_memory = best // 2 - 1, best % 2 == 1
    known = set() if known is None else known
    dicts = {name: holder.state_dict() for name, holder in state.items()}
    # Every rank describes its state, and every rank draws the same plan from all of them.
    mine = (_state.describe(dicts, digests=rank in holders), sorted(known, key=_classify.name))
    gathered = [None] * world
    dist.all_gather_object(gathered, mine)
    for _, theirs in gathered:
        known.update(tuple(p) for p in theirs)
    plan = _classify.plan([leaves for leaves, _ in gathered], holders, source, known)
    known.update(plan.per_rank)
    if by_value is not None:
        by_value.update(p for p, c in plan.classes.items() if c == _classify.PER_RANK_VALUE)
    if plan.error is not None:
        raise _state.StateRefused(plan.error)
    if plan.warning is not None and rank == source:
        print(plan.warning, file=sys.stderr, flush=True)
    if len(holders) < world:
        _state.share(state, dicts, source, device, plan, rank in holders)
    return max(step, 0), from_memory


def run(train, state, start_step=0, backend=None, reconfigure=None):
    """Runs `train(ctx)` once per round of the group until it returns (see the module's text).

    state       {name: object with state_dict() and load_state_dict()}: what a new rank must get
                from the others (model, optimizer, grad scaler, a sampler's position...); or a
                function `state(ctx)` returning that dict, called once per round on the round's
                group (sharded state: the FSDP2 model wrapped, its optimizer made; each rank's
                image is then copied to its ring neighbour at every step, _shard_copy.py, and a
                lost rank's comes back from there, _shard_recovery.py); `ctx.state` is the dict
    start_step  the step this process's own checkpoint holds (0: none), loaded into `state` by the
                script before `run`
    backend     for init_process_group when the script has not joined a group (default: "nccl"
                with CUDA, else "gloo")
    reconfigure re-form the group in place with PyTorch 2.14's experimental `_reconfigure`
                instead of a new group each round (None: MXRUN_RECONFIGURE=1 asks for it;
                `_groups.py` says how)
    """
    if not callable(state):
        _check_state(state)
    if type(start_step) is not int or start_step < 0:
        raise ValueError(f"mxrun.run: start_step must be an integer >= 0, got {start_step!r}")
    _progress.reports_itself()  # ctx.step_done reports: no automatic count beside it
    channel = _channel.shared()
    dist = _dist()
    if backend is None:
        import torch
        backend = "nccl" if torch.cuda.is_available() else "gloo"
    if channel is None:  # torchrun, or no launcher: one plain round
        if not dist.is_initialized():
            dist.init_process_group(backend)
        ctx = Context(start_step, dist.get_rank(), dist.get_world_size(), 0, "none")
        objects = _objects(state, ctx)
        step, _ = _agree(objects, start_step, False)
        train(Context(step, dist.get_rank(), dist.get_world_size(), 0,
                      "checkpoint" if step else "none", state=objects))
        dist.destroy_process_group()
        return

    _flight_recorder.serve()  # the agent may ask for the recorder's dump on a hang
    reconfigure = _groups.reconfigure_wanted(reconfigure)
    if reconfigure and dist.is_initialized():
        print("mxrun: the script joined its process group before mxrun.run: re-forming groups "
              "anew, not through _reconfigure", file=sys.stderr, flush=True)
        reconfigure = False
    if reconfigure and callable(state):
        # Seen with 2.14.1: a survivor's reconfigured group keeps its count of the groups made
        # on it, a new process's starts at 0, so the next new_group (the shard copy's, a 2-D
        # mesh's) is looked for under different store keys and times out.
        print("mxrun: a state function's groups (the shard copy's, a mesh's) are made anew each "
              "round, which a reconfigured group cannot match for a new process: re-forming "
              "groups anew, not through _reconfigure", file=sys.stderr, flush=True)
        reconfigure = False
    form = _groups.reconfigure if reconfigure else _groups.new_group
    warn = lambda m: print(m, file=sys.stderr, flush=True)  # noqa: E731
    nccl = _nccl.uses_nccl(dist.get_backend() if dist.is_initialized() else backend)
    if nccl:
        _nccl.prepare_environment(os.environ, warn)
    listener = _rounds.RoundListener(
        channel.reader(), warn=warn,
        on_notice=(lambda _notice: _nccl.abort_communicators()) if nccl else None)
    guards = []

    def guard(objects):  # NCCL: no optimizer step on a round's partial gradients
        for handle in guards:
            handle.remove()
        guards.clear()
        if nccl:
            import torch
            guards.extend(_nccl.guard_optimizer_steps(objects, listener.pending,
                                                      torch.cuda.synchronize, RoundPending))
    try:
        _run_rounds(train, state, start_step, backend, form, channel, listener, guard)
    finally:
        guard({})


def _check_state(objects):
    for name, holder in objects.items():
        if not (hasattr(holder, "state_dict") and hasattr(holder, "load_state_dict")):
            raise TypeError(f"mxrun.run: state[{name!r}] has no state_dict()/load_state_dict()")
        _refuse_unsupported(name, holder)


def _objects(state, ctx):
    """The round's state objects: `state` itself, or what the function `state(ctx)` makes on the
    round's group (a sharded model is wrapped on its group: FSDP2, tensor parallel)."""
    if not callable(state):
        return state
    objects = state(ctx)
    if not isinstance(objects, dict):
        raise TypeError(f"mxrun.run: the state function returned {type(objects).__name__}; "
                        "expected a dict {name: object with state_dict()/load_state_dict()}")
    _check_state(objects)
    return objects


def _refuse_unsupported(name, holder):
    """At once, before any round: state whose state_dict() is not each rank's whole own."""
    if type(holder).__name__ == "ZeroRedundancyOptimizer":
        raise TypeError(
            f"mxrun.run: state[{name!r}] is a ZeroRedundancyOptimizer, which shards its state by "
            "rank and gives a state_dict() only after consolidating it on one rank; supported: "
            "optimizers whose state_dict() each rank gives (any torch.optim optimizer, also over "
            "FSDP2's DTensor parameters)")


def _run_rounds(train, state, start_step, backend, form, channel, listener, guard):
    """`train` once per round until it returns (the loop of `run` under mxrun)."""
    dist = _dist()
    if os.environ.get("MXRUN_STANDBY") == "1" and callable(state):
        _shard_recovery.warm_imports()  # before the hello: a standby said ready is ready
    channel.send('{"hello": 1, "in_process_restart": true}')
    round_ = int(os.environ.get("MXRUN_ROUND", "0") or 0)
    taken = False  # whether this round came by a notice
    if os.environ.get("MXRUN_STANDBY") == "1":
        notice = listener.take(timeout=None)
        if notice is None:
            return  # the job ended without needing this standby
        os.environ.update(notice.env)
        round_, taken = notice.round, True
    completed, in_memory = start_step, False
    known = set()  # the state's paths found per-rank by nature (kept across rounds)
    by_value = set()  # and those found per-rank by value
    previous = None  # what this process kept of the last round (_shard_recovery.Previous)
    objects = None  # the round's state objects
    # The first round keeps a group the script joined itself; every later one is formed anew.
    needs_group = form is _groups.reconfigure or not dist.is_initialized()
    while True:
        ctx = None
        try:
            began = time.monotonic()
            if needs_group:
                how = form(backend, round_)
                needs_group = False
                if taken:
                    print(f"mxrun: rank {os.environ.get('RANK')}: the group of round {round_}: "
                          f"{how} in {time.monotonic() - began:.3f} s", file=sys.stderr,
                          flush=True)
            rank, world = dist.get_rank(), dist.get_world_size()
            phases = [("group", time.monotonic())]  # where a taken round's time goes
            if objects is None or callable(state):
                # The groups a state function makes (a 2-D mesh's: HSDP, tensor parallel) are
                # the round's: shut down with it, or a peer blocked on one waits 30 minutes.
                objects = _groups.subgroup(
                    lambda: _objects(state, Context(completed, rank, world, round_, "none")))
                guard(objects)
                phases.append(("state made", time.monotonic()))
            if previous is not None and previous.copier is not None:
                # Its exchange in flight ended when the last round's connections were shut down.
                previous.copier.wait(_shard_copy.JOIN_TIMEOUT)
            summaries = _shard_recovery.gather(previous, known)
            if _shard_recovery.sharded(summaries):  # images kept: only with a state function
                step = _shard_recovery.restore(summaries, previous, objects, rank, _device())
                from_memory, replicate = True, _shard_recovery.replicate(summaries)
            else:
                step, from_memory = _agree(objects, completed, in_memory, known, by_value)
                replicate = None
            phases.append(("restored" if from_memory else "agreed", time.monotonic()))
            snapshot = _buffers.BufferSnapshot(objects)
            snapshot.take()  # the agreed state's buffers
            copier = _shard_copy.start(known, callable(state), replicate, objects, by_value)
            restored = "memory" if from_memory else ("checkpoint" if step else "none")

            def joined(r=round_):
                channel.send('{"joined": %d}' % r)

            ctx = Context(step, rank, world, round_, restored, joined, listener, snapshot,
                          objects, copier)
            in_memory, completed = True, step
            previous = _shard_recovery.Previous(rank, world, step, copier, objects)
            if copier is not None:  # the agreed state is the first image
                copier.completed(step, lambda: {n: o.state_dict() for n, o in objects.items()})
                phases.append(("copy started", time.monotonic()))
            if taken:
                ends = [began] + [t for _, t in phases]
                print(f"mxrun: rank {rank}: round {round_} ready in {ends[-1] - began:.3f} s: " +
                      ", ".join(f"{name} {end - start:.3f} s" for (name, end), start
                                in zip(phases, ends)), file=sys.stderr, flush=True)
            train(ctx)
            completed = ctx.completed
            if copier is not None:  # the last step's copy in flight: done before its group goes
                copier.wait(_shard_copy.JOIN_TIMEOUT)
                print(copier.summary(), file=sys.stderr, flush=True)
            dist.destroy_process_group()
            return
        except Exception as error:  # noqa: BLE001 - whatever broke the round
            if ctx is not None:
                completed = ctx.completed  # the state in memory is that step's
                previous.completed = completed
            # A failed collective raises a RuntimeError (torch.distributed's errors derive from
            # it): the notice may still be on its way. Anything else is the script's own error,
            # unless a notice is already here.
            wait = NOTICE_WAIT if isinstance(error, RuntimeError) else 0
            notice = listener.take(timeout=wait)
            if notice is None:
                raise  # not a re-formed group: an ordinary failure, the agent restarts this rank
            print(f"mxrun: rank {os.environ.get('RANK')}: {type(error).__name__}: "
                  f"{str(error)[:200]}; taking round {notice.round} in-process as rank "
                  f"{notice.env.get('RANK')} of {notice.env.get('WORLD_SIZE')}",
                  file=sys.stderr, flush=True)
            os.environ.update(notice.env)
            round_ = notice.round
            needs_group, taken = True, True
            if ctx is not None:
                ctx._snapshot.restore()  # what the abandoned step's forward moved
            _progress.restart_timing()


def _device():
    """Where this rank's tensors go back to: its GPU with NCCL, else the CPU (None)."""
    dist = _dist()
    if _nccl.uses_nccl(dist.get_backend()):
        import torch
        return torch.device("cuda", torch.cuda.current_device())
    return None
