"""An Accelerate job as a user writes it (nothing of mxrun in it): a small regression model,
DDP over Gloo on the CPU across the launcher's ranks, AdamW, `accelerator.save_state` every
--ckpt_every steps and `load_state` of the newest at the start. Rank 0 prints {"event":
"fit_start", "global_step": N, "time": T} as training begins (after a resume: the checkpoint's
step) and {"event": "step", "global_step": N, "time": T} after each optimizer step.

Tests: --kill_rank R --kill_step K makes rank R SIGKILL itself after step K in the first attempt;
--hang_rank R --hang_step K makes it stop there, alive (job_common.maybe_fail); --slow_rank R
makes rank R's steps --slow_factor times as long (job_common.step_sleep).
"""
import os
import time

import torch
from accelerate import Accelerator

from job_common import leave, maybe_fail, parse_args, record, step_sleep


def main():
    args = parse_args()
    torch.manual_seed(0)
    accelerator = Accelerator(cpu=True)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.01)
    g = torch.Generator().manual_seed(0)
    data = torch.utils.data.TensorDataset(torch.randn(4096, 16, generator=g),
                                          torch.randn(4096, 1, generator=g))
    loader = torch.utils.data.DataLoader(data, batch_size=32)
    model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
    step = 0
    latest = os.path.join(args.ckpt_dir, "latest")
    if os.path.exists(latest):
        with open(latest) as f:
            step = int(f.read())
        accelerator.load_state(os.path.join(args.ckpt_dir, f"step_{step}"))
    rank = accelerator.process_index
    if rank == 0:
        record("fit_start", step)
    batches = iter(loader)
    while step < args.steps:
        try:
            x, y = next(batches)
        except StopIteration:
            batches = iter(loader)
            continue
        loss = torch.nn.functional.mse_loss(model(x), y)
        optimizer.zero_grad()
        accelerator.backward(loss)
        optimizer.step()
        step += 1
        if args.step_sleep:
            time.sleep(step_sleep(args))
        if rank == 0:
            record("step", step)
        maybe_fail(args, rank, step)
        if step % args.ckpt_every == 0:
            accelerator.save_state(os.path.join(args.ckpt_dir, f"step_{step}"))
            accelerator.wait_for_everyone()
            if rank == 0:
                with open(latest + ".tmp", "w") as f:
                    f.write(str(step))
                os.replace(latest + ".tmp", latest)
    accelerator.end_training()
    leave()


if __name__ == "__main__":
    main()
