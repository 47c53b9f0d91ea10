#!/usr/bin/env python3
"""A minimal PyTorch DDP program for mxrun (or torchrun): Gloo on CPU, env:// bootstrap.

Every worker reads the torchrun environment (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT), joins the
process group, checks an all-reduce, then trains a tiny model with DistributedDataParallel for a few
steps and checks that the replicas stayed identical.

    mxrun --standalone --nproc_per_node=2 scripts/examples/ddp_allreduce.py
"""
import argparse
import gc
import os
import sys
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--fail-once-on-rank", type=int, default=-1,
                        help="this global rank exits with 7 on the first attempt (tests restarts)")
    parser.add_argument("--hold-if-world", type=int, default=0,
                        help="with this world size, wait --hold-seconds after the all-reduce "
                             "(tests kill a node meanwhile)")
    parser.add_argument("--hold-seconds", type=float, default=0.0)
    args = parser.parse_args()
    rank = int(os.environ["RANK"])
    world_size = int(os.environ["WORLD_SIZE"])
    attempt = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
    dist.init_process_group("gloo", init_method="env://")
    if rank == args.fail_once_on_rank and attempt == 0:
        print(f"rank {rank} failing on purpose (attempt {attempt})", flush=True)
        return 7

    value = torch.tensor([float(rank + 1)])
    dist.all_reduce(value)
    expected = world_size * (world_size + 1) / 2
    if value.item() != expected:
        print(f"allreduce WRONG: sum={value.item()} expected={expected}", flush=True)
        return 1
    print(f"allreduce ok: sum={value.item()} world_size={world_size} attempt={attempt}", flush=True)
    if world_size == args.hold_if_world:
        time.sleep(args.hold_seconds)

    torch.manual_seed(1234 + rank)  # different data per rank; DDP syncs the parameters
    model = DistributedDataParallel(torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(),
                                                        torch.nn.Linear(32, 1)))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    for step in range(20):
        x = torch.randn(64, 16)
        y = x.sum(dim=1, keepdim=True)
        loss = torch.nn.functional.mse_loss(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step % 5 == 4 and rank == 0:
            print(f"step {step + 1} loss {loss.item():.4f}", flush=True)

    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    gathered = [torch.zeros_like(flat) for _ in range(world_size)]
    dist.all_gather(gathered, flat)
    if any(not torch.equal(gathered[0], g) for g in gathered):
        print("ddp parameters DIFFER between ranks", flush=True)
        return 1
    print("ddp parameters identical on every rank", flush=True)
    # DDP's reducer holds the process group and Gloo's threads: it goes before the group does, or
    # its destructor at interpreter exit meets a destroyed group ("terminate called without an
    # active exception", SIGABRT, seen once in CI-like load after every step had succeeded).
    del model, optimizer
    gc.collect()
    dist.barrier()
    leave_together(world_size, rank)
    return 0


def leave_together(world_size: int, rank: int, timeout: float = 60.0) -> None:
    """Ends the process group without failing a peer.

    Gloo's barrier followed at once by the group's destruction can fail a peer whose last barrier
    message had not drained when the other side closed (pytorch/gloo#155: a rare non-zero exit,
    then a restart, of a job that had finished). So every rank first says through the store that
    it is past the barrier, and destroys the group only once all are; and rank 0, whose process
    hosts the store, stays until every other rank has stopped using it.
    """
    store = dist.distributed_c10d._get_default_store()
    deadline = time.monotonic() + timeout
    store.add("ddp_allreduce/past_barrier", 1)
    while store.add("ddp_allreduce/past_barrier", 0) < world_size and time.monotonic() < deadline:
        time.sleep(0.01)
    dist.destroy_process_group()
    if rank != 0:
        store.add("ddp_allreduce/left", 1)
        return
    while store.add("ddp_allreduce/left", 0) < world_size - 1 and time.monotonic() < deadline:
        time.sleep(0.01)


if __name__ == "__main__":
    sys.exit(main())
