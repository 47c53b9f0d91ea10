#!/usr/bin/env python3
"""scripts/examples/fsdp2.py's model and data on torchft's HSDP shape, for issue 55's side-by-side
bench (scripts/bench/hsdp_recovery.py): each replica group is one torchrun with FSDP2 over its own
ranks, and torchft's Manager all-reduces the gradients across the groups (FSDP2's all-reduce hook,
as torchtitan's experiments/torchft/manager.py sets it). A lost rank takes its whole replica group
down; torchrun restarts the group's workers, the other groups train on meanwhile (min_replica_size
1), and the restarted group heals: each of its ranks fetches its shards from the same group rank
of a live group (torchft's checkpoint transport, from memory).

    torchft_lighthouse --min_replicas 1 --bind 127.0.0.1:PORT &
    TORCHFT_LIGHTHOUSE=http://127.0.0.1:PORT torchrun --nproc_per_node=2 --max_restarts=1 \
        fsdp2_torchft.py --replica_id=0 --replicas=2     # and the same with --replica_id=1

Rank 0 of each group prints {"event": "step", "replica": R, "step": N, "time": T,
"participants": P, "loss": L} for each committed step ("discarded" for a step torchft did not
commit: an all-reduce failed, it is trained again); every rank prints {"event": "done",
"rank": R, "state_sha256": ...} at the end (scripts/examples/fsdp2.py's digest of its shards and
optimizer state). A rank's data is fsdp2.py's batch(step, rank) with rank the rank over all
groups, so an undisturbed run trains exactly what `fsdp2.py --replicate=2` trains.
"""
import argparse
import json
import os
import signal
import sys
import time
from datetime import timedelta

import torch
import torch.nn.functional as F
from torch.distributed.fsdp import fully_shard
from torch.distributed.tensor import DTensor

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "examples"))
from fsdp2 import TinyLM, batch, digest  # noqa: E402  (the same model, data and digest)

import torchft  # noqa: E402


def local(value):
    return value.to_local() if isinstance(value, DTensor) else value


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--replica_id", type=int, required=True)
    p.add_argument("--replicas", type=int, default=2)
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--dim", type=int, default=128)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--vocab", type=int, default=512)
    p.add_argument("--context", type=int, default=65)
    p.add_argument("--batch_size", type=int, default=16)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--kill_rank", type=int, default=-1,
                   help="this rank (over all groups) SIGKILLs itself after the forward of "
                        "--kill_step, in its group's first attempt")
    p.add_argument("--kill_step", type=int, default=0)
    p.add_argument("--timeout", type=float, default=10.0,
                   help="torchft's timeout for collectives and transfers (seconds)")
    args = p.parse_args()
    group_rank, group_size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    rank = args.replica_id * group_size + group_rank
    torch.set_num_threads(max(1, (os.cpu_count() or 1) // int(os.environ["LOCAL_WORLD_SIZE"])))

    # The group's own process group (FSDP2's shards live on it), from torchrun's contract.
    torch.distributed.init_process_group("gloo")
    torch.manual_seed(args.seed)
    model = TinyLM(args.vocab, args.dim, args.heads, args.layers, args.context - 1)
    for block in model.blocks:
        fully_shard(block)
    fully_shard(model)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
    params = list(model.parameters())

    # torchft reads a live group's state on its quorum thread, while this thread may be in a
    # forward with FSDP2's unsharded parameters swapped in: the module's state_dict() then breaks
    # the forward, so both functions go through the sharded parameters themselves.
    def state_dict():  # this rank's shards and their optimizer state, as plain tensors
        return {"params": [q.to_local().detach() for q in params],
                "optim": {i: {k: local(v).detach() for k, v in optimizer.state[q].items()}
                          for i, q in enumerate(params) if optimizer.state[q]}}

    def load_state_dict(sd):  # a live group's same rank's shards, into this rank's
        with torch.no_grad():
            for q, v in zip(params, sd["params"], strict=True):
                q.to_local().copy_(v)
        full = optimizer.state_dict()
        full["state"] = {i: {k: (DTensor.from_local(v.clone(), params[i].device_mesh,
                                                    params[i].placements)
                                 if k != "step" else v.clone())
                             for k, v in s.items()} for i, s in sd["optim"].items()}
        optimizer.load_state_dict(full)

    manager = torchft.Manager(
        pg=torchft.ProcessGroupGloo(timeout=timedelta(seconds=args.timeout)),
        min_replica_size=1, load_state_dict=None, state_dict=None, init_sync=False,
        replica_id=f"fsdp2_torchft_{args.replica_id}", timeout=timedelta(seconds=args.timeout))
    manager.register_state_dict_fn("train", load_state_dict, state_dict)

    def all_reduce_hook(grad):  # across the replica groups (FSDP2 reduce-scatters within one)
        manager.allreduce(grad).wait()

    model.apply(lambda m: m.set_all_reduce_hook(all_reduce_hook)
                if hasattr(m, "set_all_reduce_hook") else None)
    ft_optimizer = torchft.Optimizer(manager, optimizer)
    first_attempt = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0") == "0"

    while manager.current_step() < args.steps:
        ft_optimizer.zero_grad()  # the quorum starts here (asynchronously)
        step = manager.current_step() + 1
        inputs, targets = batch(step, rank, args, torch.device("cpu"))
        loss = F.cross_entropy(model(inputs).reshape(-1, args.vocab), targets.reshape(-1))
        if first_attempt and rank == args.kill_rank and step == args.kill_step:
            os.kill(os.getpid(), signal.SIGKILL)
        loss.backward()
        ft_optimizer.step()  # applied only if every participant's all-reduce succeeded
        committed = manager.current_step() >= step
        if group_rank == 0:
            print(json.dumps({"event": "step" if committed else "discarded",
                              "replica": args.replica_id,
                              "step": manager.current_step() if committed else step,
                              "time": time.time(),
                              "participants": manager.num_participants(),
                              "loss": loss.item()}), flush=True)
    print(json.dumps({"event": "done", "rank": rank,
                      "state_sha256": digest(model, optimizer)}), flush=True)
    manager.shutdown(wait=False)
    torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main()
