"""A Lightning job as a user writes it (nothing of mxrun in it): a small regression model, DDP on
the CPU over the launcher's ranks, a checkpoint (last.ckpt) every --ckpt_every steps, resumed
from at the start when there is one. Rank 0 prints {"event": "step", "global_step": N, "time":
T} after each optimizer step and {"event": "fit_start", "global_step": N, "time": T} as fit
begins (after a resume: the checkpoint's step), the framework's own log that the tests compare
mxrun's goodput line with.

Tests: --kill_rank R --kill_step K makes rank R SIGKILL itself after step K in the first attempt.
"""
import argparse
import json
import os
import signal
import sys
import time

import torch
from torch.utils.data import DataLoader, TensorDataset
import lightning.pytorch as pl
from lightning.pytorch.callbacks import ModelCheckpoint


class Regression(pl.LightningModule):
    def __init__(self, sleep):
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(),
                                       torch.nn.Linear(32, 1))
        self.sleep = sleep

    def training_step(self, batch, batch_idx):
        x, y = batch
        if self.sleep:
            time.sleep(self.sleep)
        return torch.nn.functional.mse_loss(self.net(x), y)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)  # keeps no step count of its own


class Log(pl.Callback):
    def __init__(self, args):
        self.args = args

    def on_train_start(self, trainer, module):
        if trainer.global_rank == 0:
            print(json.dumps({"event": "fit_start", "global_step": trainer.global_step,
                              "time": time.time()}), flush=True)

    def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx):
        step = trainer.global_step
        if trainer.global_rank == 0:
            print(json.dumps({"event": "step", "global_step": step, "time": time.time()}),
                  flush=True)
        first_attempt = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0") == "0"
        if first_attempt and trainer.global_rank == self.args.kill_rank and \
                step == self.args.kill_step:
            os.kill(os.getpid(), signal.SIGKILL)


def leave():
    """Ends the process without the interpreter's teardown, where PyTorch 2.13's Gloo aborts now
    and then ("terminate called without an active exception", SIGABRT: 1 run in 6 of this job
    under torchrun 2.13 too; destroy_process_group first hung 2 runs in 8 instead). The job is
    done and its output written: the tests judge the launcher, not that teardown."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--ckpt_dir", required=True)
    p.add_argument("--ckpt_every", type=int, default=5)
    p.add_argument("--step_sleep", type=float, default=0.05)
    p.add_argument("--kill_rank", type=int, default=-1)
    p.add_argument("--kill_step", type=int, default=0)
    args = p.parse_args()
    torch.manual_seed(0)
    data = TensorDataset(torch.randn(4096, 16), torch.randn(4096, 1))
    world = int(os.environ.get("WORLD_SIZE", "1"))
    trainer = pl.Trainer(
        accelerator="cpu", devices=int(os.environ.get("LOCAL_WORLD_SIZE", "1")),
        num_nodes=world // int(os.environ.get("LOCAL_WORLD_SIZE", "1")), strategy="ddp",
        max_steps=args.steps, logger=False, enable_progress_bar=False,
        enable_model_summary=False,
        callbacks=[Log(args), ModelCheckpoint(dirpath=args.ckpt_dir, save_last=True,
                                              every_n_train_steps=args.ckpt_every,
                                              save_top_k=0)])
    last = os.path.join(args.ckpt_dir, "last.ckpt")
    trainer.fit(Regression(args.step_sleep), DataLoader(data, batch_size=32),
                ckpt_path=last if os.path.exists(last) else None)
    leave()


if __name__ == "__main__":
    main()
