"""A Hugging Face Trainer job as a user writes it (nothing of mxrun in it): a small regression
model, DDP over Gloo on the CPU across the launcher's ranks, a checkpoint every --ckpt_every
steps, resumed from the newest at the start (resume_from_checkpoint=True). Rank 0 prints
{"event": "fit_start", "global_step": N, "time": T} as training begins (after a resume: the
checkpoint's step) and {"event": "step", "global_step": N, "time": T} after each optimizer step:
the framework's own log that the tests compare mxrun's goodput line with.

Tests: --kill_rank R --kill_step K makes rank R SIGKILL itself after step K in the first attempt;
--hang_rank R --hang_step K makes it stop there, alive (job_common.maybe_fail); --slow_rank R
makes rank R's steps --slow_factor times as long (job_common.step_sleep).
"""
import glob
import os
import time

import torch
from transformers import Trainer, TrainerCallback, TrainingArguments

from job_common import leave, maybe_fail, parse_args, record, step_sleep


class Regression(torch.nn.Module):
    def __init__(self, sleep):
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(),
                                       torch.nn.Linear(32, 1))
        self.sleep = sleep

    def forward(self, x, labels=None):
        if self.sleep:
            time.sleep(self.sleep)
        out = self.net(x)
        return {"loss": torch.nn.functional.mse_loss(out, labels), "logits": out}


class Rows(torch.utils.data.Dataset):
    def __init__(self, n):
        g = torch.Generator().manual_seed(0)
        self.x, self.y = torch.randn(n, 16, generator=g), torch.randn(n, 1, generator=g)

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        return {"x": self.x[i], "labels": self.y[i]}


class Log(TrainerCallback):
    def __init__(self, args):
        self.args = args

    def on_train_begin(self, args, state, control, **kwargs):
        if state.is_world_process_zero:
            record("fit_start", state.global_step)

    def on_step_end(self, args, state, control, **kwargs):
        if state.is_world_process_zero:
            record("step", state.global_step)
        maybe_fail(self.args, int(os.environ.get("RANK", "0")), state.global_step)


def main():
    args = parse_args()
    torch.manual_seed(0)
    training = TrainingArguments(
        output_dir=args.ckpt_dir, max_steps=args.steps, per_device_train_batch_size=32,
        save_strategy="steps", save_steps=args.ckpt_every, logging_steps=1000,
        report_to="none", use_cpu=True, ddp_backend="gloo", dataloader_num_workers=0,
        disable_tqdm=True, seed=0, learning_rate=0.01, optim="sgd")
    trainer = Trainer(model=Regression(step_sleep(args)), args=training,
                      train_dataset=Rows(4096), callbacks=[Log(args)])
    resume = bool(glob.glob(os.path.join(args.ckpt_dir, "checkpoint-*")))
    trainer.train(resume_from_checkpoint=True if resume else None)
    leave()


if __name__ == "__main__":
    main()
