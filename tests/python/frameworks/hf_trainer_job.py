"""A Hugging Face Trainer job as a user writes it (nothing of mxrun in it): a small regression
model, DDP over Gloo on the CPU across the launcher's ranks, a checkpoint every --ckpt_every
steps, resumed from the newest at the start (resume_from_checkpoint=True). Rank 0 prints
{"event": "fit_start", "global_step": N, "time": T} as training begins (after a resume: the
checkpoint's step) and {"event": "step", "global_step": N, "time": T} after each optimizer step:
the framework's own log that the tests compare mxrun's goodput line with.

Tests: --kill_rank R --kill_step K makes rank R SIGKILL itself after step K in the first attempt.
"""
import argparse
import glob
import json
import os
import signal
import sys
import time

import torch
from transformers import Trainer, TrainerCallback, TrainingArguments


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
            print(json.dumps({"event": "fit_start", "global_step": state.global_step,
                              "time": time.time()}), flush=True)

    def on_step_end(self, args, state, control, **kwargs):
        if state.is_world_process_zero:
            print(json.dumps({"event": "step", "global_step": state.global_step,
                              "time": time.time()}), flush=True)
        first_attempt = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0") == "0"
        if first_attempt and int(os.environ.get("RANK", "0")) == self.args.kill_rank and \
                state.global_step == self.args.kill_step:
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
    training = TrainingArguments(
        output_dir=args.ckpt_dir, max_steps=args.steps, per_device_train_batch_size=32,
        save_strategy="steps", save_steps=args.ckpt_every, logging_steps=1000,
        report_to="none", use_cpu=True, ddp_backend="gloo", dataloader_num_workers=0,
        disable_tqdm=True, seed=0, learning_rate=0.01, optim="sgd")
    trainer = Trainer(model=Regression(args.step_sleep), args=training,
                      train_dataset=Rows(4096), callbacks=[Log(args)])
    resume = bool(glob.glob(os.path.join(args.ckpt_dir, "checkpoint-*")))
    trainer.train(resume_from_checkpoint=True if resume else None)
    leave()


if __name__ == "__main__":
    main()
