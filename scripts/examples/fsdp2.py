#!/usr/bin/env python3
"""A complete FSDP2 training script that keeps its work through failures under mxrun: a small
transformer language model on synthetic tokens, every Linear and block sharded with
`torch.distributed.fsdp.fully_shard`, AdamW; Gloo on the CPU, NCCL on GPUs (--device).

    mxrun --standalone --nproc_per_node=2 --max_restarts=3 --standby_workers=1 scripts/examples/fsdp2.py
    torchrun --standalone --nproc_per_node=2 scripts/examples/fsdp2.py   # runs the same

What mxrun adds (marked "mxrun:"): the model is wrapped and its optimizer made in a function,
`build(ctx)`, that `mxrun.run` calls for each round on that round's group (FSDP2's shards live on
their group, which a failure replaces); the loop is a function called once per round with the
step to go on from; `ctx.step_done(step)` is each step's last call. Each rank's shards, with
their optimizer state, are copied to its ring neighbour's host memory at every completed step;
when a rank dies, its standby or new process gets them from there, the survivors keep theirs,
and training goes on from the last completed step: no step is trained twice, and every rank ends
bit for bit where an undisturbed run ends.

Rank 0 prints {"event": "step", "step": N, "time": <unix seconds>, "loss": L} for each step; every
rank prints {"event": "round", "rank": R, "pid": P, "from_step": S, ...} as it (re)starts the loop
and {"event": "done", "rank": R, "state_sha256": <SHA-256 of its shards and their optimizer
state>} at the end (equal digests, rank by rank: bitwise-equal state). With no arguments: about a
minute on 2 CPU workers. --replicate=R makes it HSDP (R replica groups: a lost rank's shards come
from its replica peer, no copy kept); --tp=T splits each block's MLP over T ranks (tensor parallel
on a 2-D mesh, FSDP2 over the other dimension).
"""
import argparse
import hashlib
import json
import os
import signal
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard
from torch.distributed.tensor.parallel import (ColwiseParallel, RowwiseParallel,
                                               parallelize_module)

import mxrun


class Block(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.up, self.down = nn.Linear(dim, 4 * dim), nn.Linear(4 * dim, dim)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(b, t, 3, self.heads, d // self.heads).unbind(2)
        y = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2),
                                           v.transpose(1, 2), is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, d))
        return x + self.down(F.gelu(self.up(self.norm2(x))))


class TinyLM(nn.Module):
    def __init__(self, vocab, dim, heads, layers, context):
        super().__init__()
        self.embed, self.pos = nn.Embedding(vocab, dim), nn.Embedding(context, dim)
        self.blocks = nn.ModuleList(Block(dim, heads) for _ in range(layers))
        self.norm, self.head = nn.LayerNorm(dim), nn.Linear(dim, vocab)

    def forward(self, tokens):
        x = self.embed(tokens) + self.pos(torch.arange(tokens.shape[1], device=tokens.device))
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x))


def batch(step, rank, args, device):
    """Rank `rank`'s tokens for `step`: the same wherever and however often it is drawn."""
    g = torch.Generator().manual_seed(args.seed * 1_000_003 + step * 1009 + rank)
    # A learnable stream: each token is the previous one plus a small step, modulo the vocabulary.
    start = torch.randint(0, args.vocab, (args.batch_size, 1), generator=g)
    steps = torch.randint(1, 4, (args.batch_size, args.context), generator=g)
    tokens = (start + steps.cumsum(1)) % args.vocab
    return tokens[:, :-1].to(device), tokens[:, 1:].to(device)


def digest(model, optimizer):
    """SHA-256 of this rank's shards and their optimizer state."""
    d = hashlib.sha256()
    for name, value in model.state_dict().items():
        d.update(name.encode())
        local = value.to_local() if hasattr(value, "to_local") else value
        d.update(local.detach().cpu().contiguous().numpy().tobytes())
    for index, state in sorted(optimizer.state_dict()["state"].items()):
        for key in sorted(state):
            value = state[key]
            local = value.to_local() if hasattr(value, "to_local") else value
            d.update(f"{index}.{key}".encode())
            d.update(local.detach().cpu().contiguous().numpy().tobytes())
    return d.hexdigest()


def full_digest(model, optimizer):
    """SHA-256 of the whole unsharded state (every rank calls it: each DTensor is gathered)."""
    d = hashlib.sha256()
    entries = list(model.state_dict().items())
    for index, state in sorted(optimizer.state_dict()["state"].items()):
        entries += [(f"{index}.{key}", state[key]) for key in sorted(state)]
    for name, value in entries:
        full = value.full_tensor() if hasattr(value, "full_tensor") else value
        d.update(name.encode())
        d.update(full.detach().cpu().contiguous().numpy().tobytes())
    return d.hexdigest()


def latest_checkpoint(directory):
    """The step of the last complete checkpoint in `directory` (0: none)."""
    try:
        with open(os.path.join(directory, "latest")) as f:
            return int(f.read())
    except (OSError, ValueError):
        return 0


def save_checkpoint(directory, step, model, optimizer, rank):
    """A torch.distributed.checkpoint of every rank's shards (the way a torchrun job resumes)."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict
    model_sd, optim_sd = get_state_dict(model, optimizer)
    dcp.save({"model": model_sd, "optim": optim_sd},
             checkpoint_id=os.path.join(directory, f"step_{step}"))
    if rank == 0:  # (dcp.save ends with a barrier: every rank's part is written)
        with open(os.path.join(directory, "latest.tmp"), "w") as f:
            f.write(str(step))
        os.replace(os.path.join(directory, "latest.tmp"), os.path.join(directory, "latest"))


def load_checkpoint(directory, step, model, optimizer):
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict
    model_sd, optim_sd = get_state_dict(model, optimizer)
    state = {"model": model_sd, "optim": optim_sd}
    dcp.load(state, checkpoint_id=os.path.join(directory, f"step_{step}"))
    set_state_dict(model, optimizer, model_state_dict=state["model"],
                   optim_state_dict=state["optim"])


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--dim", type=int, default=128)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--vocab", type=int, default=512)
    p.add_argument("--context", type=int, default=65, help="tokens per sequence (+1 for targets)")
    p.add_argument("--batch_size", type=int, default=16, help="sequences per rank per step")
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--replicate", type=int, default=1,
                   help="HSDP: this many replica groups, each sharding over world/replicate ranks")
    p.add_argument("--tp", type=int, default=1,
                   help="tensor parallel: each block's MLP split over this many ranks (a 2-D "
                        "mesh, FSDP2 over world/tp data-parallel ranks)")
    p.add_argument("--device", choices=("cpu", "cuda"),
                   default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--kill_rank", type=int, default=-1,
                   help="tests: this rank SIGKILLs itself at --kill_step, in the first attempt")
    p.add_argument("--kill_step", type=int, default=0)
    p.add_argument("--kill_after_forward", action="store_true",
                   help="tests: the kill comes after that step's forward (the last step's copy "
                        "has arrived), not as the step begins (it may still be on its way)")
    p.add_argument("--step_sleep", type=float, default=0.0, help="tests: seconds after each step")
    p.add_argument("--ckpt_dir", default="",
                   help="a torch.distributed.checkpoint every --ckpt_every steps, resumed from "
                        "at the start (how a torchrun job comes back; under mxrun the state "
                        "comes back from memory and this is not needed)")
    p.add_argument("--ckpt_every", type=int, default=10)
    p.add_argument("--log_full_state", action="store_true",
                   help="tests: rank 0 prints {\"event\": \"full\", \"step\": N, \"sha256\": ...} of the "
                        "whole unsharded state as each round starts and after each step")
    args = p.parse_args()
    torch.set_num_threads(max(1, (os.cpu_count() or 1) // int(os.environ.get("LOCAL_WORLD_SIZE", 1))))
    device = torch.device("cpu")
    if args.device == "cuda":
        device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0)))
        torch.cuda.set_device(device)

    if args.replicate > 1 and args.tp > 1:
        p.error("--replicate and --tp: one or the other")

    def mesh(world):
        """FSDP2's mesh: None (all ranks), HSDP's (replicate, shard), or the (dp, tp) mesh."""
        if args.replicate > 1:
            return init_device_mesh(device.type, (args.replicate, world // args.replicate),
                                    mesh_dim_names=("replicate", "shard"))
        if args.tp > 1:
            return init_device_mesh(device.type, (world // args.tp, args.tp),
                                    mesh_dim_names=("dp", "tp"))
        return None

    start_step = latest_checkpoint(args.ckpt_dir) if args.ckpt_dir else 0
    resumed = []

    def build(ctx):  # mxrun: the sharded model and its optimizer, on this round's group
        torch.manual_seed(args.seed)  # every round and rank starts from the same weights
        model = TinyLM(args.vocab, args.dim, args.heads, args.layers, args.context - 1).to(device)
        shard_mesh = mesh(ctx.world_size)
        if args.tp > 1:  # each MLP's hidden layer split over the tp ranks
            for block in model.blocks:
                parallelize_module(block, shard_mesh["tp"],
                                   {"up": ColwiseParallel(), "down": RowwiseParallel()})
            shard_mesh = shard_mesh["dp"]
        for block in model.blocks:
            fully_shard(block, mesh=shard_mesh)
        fully_shard(model, mesh=shard_mesh)
        optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
        if start_step and not resumed:  # this process's first round: from the checkpoint
            load_checkpoint(args.ckpt_dir, start_step, model, optimizer)
            resumed.append(start_step)
        return {"model": model, "optimizer": optimizer}

    def train(ctx):  # mxrun: the loop, called once per round with the step to go on from
        model, optimizer = ctx.state["model"], ctx.state["optimizer"]
        print(json.dumps({"event": "round", "rank": ctx.rank, "pid": os.getpid(),
                          "from_step": ctx.step, "restored_from": ctx.restored_from,
                          "world_size": ctx.world_size}), flush=True)

        def log_full(step):
            full = full_digest(model, optimizer)
            if ctx.rank == 0:
                print(json.dumps({"event": "full", "step": step, "world_size": ctx.world_size,
                                  "sha256": full}), flush=True)
        if args.log_full_state:
            log_full(ctx.step)
        for step in range(ctx.step + 1, args.steps + 1):
            # (read now: a standby started in the first attempt takes a later round's contract)
            first_attempt = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0") == "0"
            kill = first_attempt and ctx.rank == args.kill_rank and step == args.kill_step
            if kill and not args.kill_after_forward:
                os.kill(os.getpid(), signal.SIGKILL)
            # (the ranks of one tensor-parallel group train on the same tokens)
            inputs, targets = batch(step, ctx.rank // args.tp, args, device)
            logits = model(inputs)
            loss = F.cross_entropy(logits.reshape(-1, args.vocab), targets.reshape(-1))
            if kill:
                os.kill(os.getpid(), signal.SIGKILL)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            if ctx.rank == 0:
                print(json.dumps({"event": "step", "step": step, "time": time.time(),
                                  "loss": loss.item()}), flush=True)
            if args.log_full_state:
                log_full(step)
            if args.ckpt_dir and step % args.ckpt_every == 0:
                save_checkpoint(args.ckpt_dir, step, model, optimizer, ctx.rank)
            ctx.step_done(step)  # mxrun: progress, the copy, and where a new round is taken
            if args.step_sleep:  # (between steps: a step's report is not delayed)
                time.sleep(args.step_sleep)
        print(json.dumps({"event": "done", "rank": ctx.rank,
                          "state_sha256": digest(model, optimizer)}), flush=True)

    mxrun.run(train, build, start_step)  # mxrun: a function that makes the state, per round


if __name__ == "__main__":
    main()
