#!/usr/bin/env python3
"""A plain PyTorch DDP script, written as torchrun's users write one: init_process_group("nccl"),
DDP(model, device_ids=[local_rank]), fp16 autocast with GradScaler. Nothing in it knows about
mxrun. scripts/gpu/run-all.sh runs it under mxrun and under the machine's torchrun and diffs
what each worker saw (scripts/gpu/env_diff.py).

  ddp_nccl_amp.py DUMP_DIR TAG [--steps N] [--env_only]

Each rank writes DUMP_DIR/TAG_rank<RANK>.json: its whole environment ("env"), its CPU affinity,
and (without --env_only) its CUDA device, the all-reduced check sum and the last loss.
--env_only imports no torch (the NUMA-binding comparison needs only the placement).
"""
import argparse
import json
import os
import sys


def dump(path, doc):
    with open(path + ".tmp", "w") as f:
        json.dump(doc, f, sort_keys=True, indent=1)
    os.replace(path + ".tmp", path)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("dump_dir")
    parser.add_argument("tag")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--env_only", action="store_true")
    args = parser.parse_args()
    rank = int(os.environ["RANK"])
    doc = {"env": dict(os.environ), "cpus": sorted(os.sched_getaffinity(0))}
    path = os.path.join(args.dump_dir, f"{args.tag}_rank{rank}.json")
    if args.env_only:
        dump(path, doc)
        return 0

    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    dist.init_process_group("nccl")
    world = dist.get_world_size()
    check = torch.tensor([float(rank + 1)], device="cuda")
    dist.all_reduce(check)
    expected = world * (world + 1) / 2
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 32, 3, padding=1), torch.nn.BatchNorm2d(32), torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(32, 10)).cuda()
    model = DDP(model, device_ids=[local_rank])
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    scaler = torch.amp.GradScaler("cuda")
    generator = torch.Generator(device="cuda").manual_seed(1234 + rank)
    loss = None
    for _ in range(args.steps):
        x = torch.randn(64, 3, 32, 32, device="cuda", generator=generator)
        y = torch.randint(0, 10, (64,), device="cuda", generator=generator)
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.float16):
            loss = torch.nn.functional.cross_entropy(model(x), y)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
    doc.update(device=torch.cuda.current_device(), device_name=torch.cuda.get_device_name(),
               check_sum=check.item(), expected_sum=expected, last_loss=loss.item(),
               torch=torch.__version__, nccl=".".join(map(str, torch.cuda.nccl.version())))
    dump(path, doc)
    dist.destroy_process_group()
    print(f"rank {rank}: process group destroyed, leaving main", file=sys.stderr, flush=True)
    if check.item() != expected:
        print(f"rank {rank}: all-reduce gave {check.item()}, expected {expected}", file=sys.stderr)
        return 1
    if rank == 0:
        print(json.dumps({"world": world, "last_loss": loss.item(), "check_sum": check.item()}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
