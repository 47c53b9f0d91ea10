"""A worker for tests/integration/python_recovery_test.cc: `mxrun.run` on a tiny model, 20 steps.
In the first attempt rank 1 SIGKILLs itself at step 5, and rank 0, kept for the in-process round,
then blocks in that round's setup, before any step: the round never reaches its first step. Later
attempts train through. Rank 0 prints {"event": "done", ...} at the end."""
import json
import os
import signal
import time

import torch
from torch.nn.parallel import DistributedDataParallel as DDP

import mxrun

# As this process began (a round notice updates the environment later).
FIRST_ATTEMPT = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0") == "0"
FIRST_ROUND = int(os.environ.get("MXRUN_ROUND", "0") or 0)

torch.manual_seed(0)
model = torch.nn.Linear(4, 2)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)


def train(ctx):
    if FIRST_ATTEMPT and ctx.round > FIRST_ROUND:  # kept for an in-process round
        print(json.dumps({"event": "blocking", "rank": ctx.rank, "round": ctx.round}), flush=True)
        time.sleep(3600)  # the hang: never reaches a step (its peer waits in DDP's broadcast)
    ddp = DDP(model)
    for step in range(ctx.step + 1, 21):
        loss = ddp(torch.ones(8, 4)).square().mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if FIRST_ATTEMPT and ctx.rank == 1 and step == 5:
            os.kill(os.getpid(), signal.SIGKILL)
        ctx.step_done(step)
        time.sleep(0.02)
    if ctx.rank == 0:
        print(json.dumps({"event": "done", "rank": 0, "step": ctx.completed}), flush=True)


mxrun.run(train, {"model": model, "optimizer": optimizer})
