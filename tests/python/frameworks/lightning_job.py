"""A Lightning job as a user writes it (nothing of mxrun in it): a small regression model, DDP on
the CPU over the launcher's ranks, a checkpoint (last.ckpt) every --ckpt_every steps, resumed
from at the start when there is one. Rank 0 prints {"event": "step", "global_step": N, "time":
T} after each optimizer step and {"event": "fit_start", "global_step": N, "time": T} as fit
begins (after a resume: the checkpoint's step), the framework's own log that the tests compare
mxrun's goodput line with.

Tests: --kill_rank R --kill_step K makes rank R SIGKILL itself after step K in the first attempt;
--hang_rank R --hang_step K makes it stop there, alive (job_common.maybe_fail); --slow_rank R
makes rank R's steps --slow_factor times as long (job_common.step_sleep).
"""
import os
import time

import torch
from torch.utils.data import DataLoader, TensorDataset
import lightning.pytorch as pl
from lightning.pytorch.callbacks import ModelCheckpoint

from job_common import leave, maybe_fail, parse_args, record, step_sleep


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
            record("fit_start", trainer.global_step)

    def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx):
        step = trainer.global_step
        if trainer.global_rank == 0:
            record("step", step)
        maybe_fail(self.args, trainer.global_rank, step)


def main():
    args = parse_args()
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
    trainer.fit(Regression(step_sleep(args)), DataLoader(data, batch_size=32),
                ckpt_path=last if os.path.exists(last) else None)
    leave()


if __name__ == "__main__":
    main()
