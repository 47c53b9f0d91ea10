#!/usr/bin/env python3
"""A complete PyTorch DDP training script that keeps its work through failures under mxrun:
ResNet-18 on synthetic CIFAR-shaped data, Gloo on CPU, NCCL on GPUs (--device).

    mxrun --standalone --nproc_per_node=2 --max_restarts=3 scripts/examples/elastic_ddp.py
    torchrun --standalone --nproc_per_node=2 scripts/examples/elastic_ddp.py   # runs the same

What mxrun adds is three lines (marked "mxrun:"): the training loop is a function that
`mxrun.run` calls once per round of the group, with the step to go on from; `ctx.step_done(step)`,
the last call of each step, reports progress and is where a re-formed group is taken. When a worker
dies, the others keep their processes and their state; the dead rank's new process (or a warm
standby, `--standby_workers=1`) gets the state from them by broadcast, and training goes on from
the last completed step: no step is trained twice. A checkpoint (`--ckpt_dir`) still serves a
restart of the whole job.

Rank 0 prints one JSON line per step, {"event": "step", "step": N, "time": <unix seconds>,
"loss": L}; every rank prints {"event": "round", "rank": R, "pid": P, "from_step": S, ...} as it
(re)starts the loop and {"event": "done", "rank": R, "params": <sum of all parameters>,
"weights_sha256": <SHA-256 of the parameters and momentum buffers>, "state_sha256": <the same
with the model's buffers too>} at the end (equal digests: bitwise-equal state) (scripts/bench/recovery.sh and the tests read them). With no arguments: ResNet-18 at
width 16, batch 64 per worker, about a minute on 2 CPU workers.
"""
import argparse
import json
import os
import signal
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

import mxrun


class DataPosition:
    """Where the group stands in its data, as a sampler's state: the epoch and how many images of
    its order the group has trained on. Each step takes the next `batch_size * world` images, rank
    r the r-th slice, so a group re-formed at another world size re-shards from here: no image of
    the epoch is skipped or trained twice. In `mxrun.run`'s state, like the model and optimizer."""

    def __init__(self, images, batch_size):
        self.images, self.batch_size = images, batch_size
        self.epoch, self.offset = 0, 0
        self._order = (None, None)

    def batch_indices(self, rank, world):
        if self._order[0] != self.epoch:  # every rank shuffles an epoch the same way
            g = torch.Generator().manual_seed(self.epoch)
            self._order = (self.epoch, torch.randperm(self.images, generator=g))
        start = self.offset + rank * self.batch_size
        return self._order[1][start:start + self.batch_size]

    def advance(self, world):
        self.offset += self.batch_size * world
        if self.offset + self.batch_size * world > self.images:  # a partial batch: next epoch
            self.epoch, self.offset = self.epoch + 1, 0

    def state_dict(self):
        return {"epoch": self.epoch, "offset": self.offset}

    def load_state_dict(self, state):
        self.epoch, self.offset = int(state["epoch"]), int(state["offset"])


class Block(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.down = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                      nn.BatchNorm2d(cout))

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return F.relu(y + (x if self.down is None else self.down(x)))


def resnet18(width, classes=10):
    layers = [nn.Conv2d(3, width, 3, 1, 1, bias=False), nn.BatchNorm2d(width), nn.ReLU()]
    cin = width
    for stage, stride in enumerate((1, 2, 2, 2)):
        cout = width * 2 ** stage
        layers += [Block(cin, cout, stride), Block(cout, cout, 1)]
        cin = cout
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(cin, classes)]
    return nn.Sequential(*layers)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--width", type=int, default=16)
    p.add_argument("--batch_size", type=int, default=64, help="images per worker per step")
    p.add_argument("--images", type=int, default=8192, help="synthetic training images")
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--ckpt_dir", default="", help="rank 0 checkpoints here (empty: never)")
    p.add_argument("--ckpt_every", type=int, default=50)
    p.add_argument("--device", choices=("cpu", "cuda"),
                   default="cuda" if torch.cuda.is_available() else "cpu",
                   help="cuda: one GPU per worker (LOCAL_RANK), NCCL; cpu: Gloo")
    p.add_argument("--kill_rank", type=int, default=-1,
                   help="tests: this rank SIGKILLs itself at --kill_step in the job's first attempt")
    p.add_argument("--kill_step", type=int, default=0)
    p.add_argument("--kill_after_forward", action="store_true",
                   help="tests: the kill comes after that step's forward (the others' forward has "
                        "moved their BatchNorm statistics when their backward finds the rank gone)")
    args = p.parse_args()
    torch.manual_seed(0)  # every rank builds the same model; a new rank gets the group's anyway
    torch.set_num_threads(max(1, (os.cpu_count() or 1) // int(os.environ.get("LOCAL_WORLD_SIZE", 1))))

    # The data: synthetic CIFAR-shaped images, read in each epoch's shuffled order.
    g = torch.Generator().manual_seed(1)
    images = torch.randint(0, 256, (args.images, 3, 32, 32), dtype=torch.uint8, generator=g)
    labels = torch.randint(0, 10, (args.images,), generator=g)

    position = DataPosition(args.images, args.batch_size)

    device = torch.device("cpu")
    if args.device == "cuda":
        device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0)))
        torch.cuda.set_device(device)
    model = resnet18(args.width).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9, weight_decay=1e-4)
    start_step = 0
    ckpt = os.path.join(args.ckpt_dir, "checkpoint.pt") if args.ckpt_dir else ""
    if ckpt and os.path.exists(ckpt):
        saved = torch.load(ckpt, map_location=device)
        model.load_state_dict(saved["model"])
        optimizer.load_state_dict(saved["optimizer"])
        position.load_state_dict(saved["position"])
        start_step = saved["step"]

    def train(ctx):  # mxrun: the loop, called once per round with the step to go on from
        print(json.dumps({"event": "round", "rank": ctx.rank, "pid": os.getpid(),
                          "from_step": ctx.step, "restored_from": ctx.restored_from,
                          "world_size": ctx.world_size, "position": position.state_dict()}),
              flush=True)
        ddp = DDP(model, device_ids=[device.index] if device.type == "cuda" else None)
        for step in range(ctx.step + 1, args.steps + 1):
            # (read now: a standby started in the first attempt takes a later round's contract)
            first_attempt = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0") == "0"
            kill = first_attempt and ctx.rank == args.kill_rank and step == args.kill_step
            if kill and not args.kill_after_forward:
                os.kill(os.getpid(), signal.SIGKILL)
            idx = position.batch_indices(ctx.rank, ctx.world_size)
            x = images[idx].to(device).float().div_(255).sub_(0.5)
            y = labels[idx].to(device)
            loss = F.cross_entropy(ddp(x), y)
            if kill:
                os.kill(os.getpid(), signal.SIGKILL)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            position.advance(ctx.world_size)
            if ctx.rank == 0:
                print(json.dumps({"event": "step", "step": step, "time": time.time(),
                                  "loss": loss.item()}), flush=True)
                if ckpt and step % args.ckpt_every == 0:
                    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                                "position": position.state_dict(), "step": step}, ckpt + ".tmp")
                    os.replace(ckpt + ".tmp", ckpt)
            # mxrun: progress, and where a re-formed group is taken: it may leave `train` for the
            # next round, so it is the step's last call (the log line and checkpoint come before)
            ctx.step_done(step)
        total = sum(float(t.detach().double().sum()) for t in model.parameters())
        print(json.dumps({"event": "done", "rank": ctx.rank, "params": repr(total),
                          "weights_sha256": state_digest(model, optimizer, buffers=False),
                          "state_sha256": state_digest(model, optimizer)}), flush=True)

    # mxrun: the state a new rank takes from the others
    mxrun.run(train, {"model": model, "optimizer": optimizer, "position": position},
              start_step=start_step)


def state_digest(model, optimizer, buffers=True):
    """SHA-256 over the model's parameters and buffers (state_dict order; `buffers=False`: the
    parameters only) and the optimizer's momentum buffers: two runs with the same digest ended
    with bitwise-equal state."""
    import hashlib
    digest = hashlib.sha256()
    names = None if buffers else {name for name, _ in model.named_parameters()}
    for name, tensor in model.state_dict().items():
        if names is not None and name not in names:
            continue
        digest.update(name.encode())
        digest.update(tensor.detach().cpu().contiguous().numpy().tobytes())
    for group in optimizer.param_groups:
        for param in group["params"]:
            buffer = optimizer.state.get(param, {}).get("momentum_buffer")
            digest.update(b"none" if buffer is None else
                          buffer.detach().cpu().contiguous().numpy().tobytes())
    return digest.hexdigest()


if __name__ == "__main__":
    main()
