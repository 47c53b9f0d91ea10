"""One rank of tests/python/test_state_kinds.py: `mxrun.run` without a launcher (as under torchrun)
on a Gloo group over a file store, with state that differs by rank. Prints one JSON line with
what the rank holds after the round's agreement.

    state_kinds_worker.py STORE RANK WORLD KIND    KIND: per-rank, fsdp2, zero
"""
import hashlib
import json
import os
import sys

import torch
import torch.distributed as dist

import mxrun

store, rank, world, kind = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
dist.init_process_group("gloo", init_method="file://" + store, rank=rank, world_size=world)


class Own:
    """Rank r holds r+1 elements, all r, and a number of its own."""

    def __init__(self):
        self.t, self.n = torch.full((rank + 1,), float(rank)), rank * 10

    def state_dict(self):
        return {"t": self.t, "n": self.n}

    def load_state_dict(self, state):
        self.t, self.n = state["t"], state["n"]


def digest(model):
    d = hashlib.sha256()
    for value in model.state_dict().values():
        local = value.to_local() if hasattr(value, "to_local") else value
        d.update(local.detach().contiguous().numpy().tobytes())
    return d.hexdigest()


torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
if kind == "fsdp2":
    from torch.distributed.fsdp import fully_shard
    for layer in model:
        if isinstance(layer, torch.nn.Linear):
            fully_shard(layer)
    fully_shard(model)
if kind == "zero":
    from torch.distributed.optim import ZeroRedundancyOptimizer
    optimizer = ZeroRedundancyOptimizer(model.parameters(), optimizer_class=torch.optim.SGD, lr=0.1)
else:
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.01)
own = Own()
# Rank r's BatchNorm-like buffer of its own: same shape everywhere, another value.
model.register_buffer("seen", torch.tensor([float(rank)]))


def train(ctx):
    g = torch.Generator().manual_seed(100 + ctx.rank)  # each rank its own data
    for step in range(ctx.step + 1, 4):
        loss = model(torch.randn(4, 8, generator=g)).square().mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        ctx.step_done(step)
    print(json.dumps({"rank": ctx.rank, "t": own.t.tolist(), "n": own.n,
                      "seen": model.seen.tolist(), "digest": digest(model)}), flush=True)


if len(sys.argv) > 5 and sys.argv[5] == "plain":  # the same loop without mxrun
    class Plain:
        step = 0

        def step_done(self, step):
            pass
    Plain.rank = rank
    train(Plain())
    dist.destroy_process_group()
else:
    mxrun.run(train, {"own": own, "model": model, "optimizer": optimizer})
# Done (an error above exits 1): skip the interpreter's teardown, where PyTorch 2.13 with FSDP2 over
# Gloo aborts ("terminate called without an active exception", after destroy_process_group
# returned) in about 1 run of 8 on this machine, with or without mxrun.
sys.stdout.flush()
sys.stderr.flush()
os._exit(0)
