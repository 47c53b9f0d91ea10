"""A worker for the fault catalogue's data loader row (tests/faults/catalogue.h): trains nothing,
but reads STEPS batches from a torch DataLoader with one loader process, reporting each step
through mxrun.step_done. In the first attempt, rank HANG_RANK's loader process blocks forever on
the batch of step HANG_STEP (as a loader stuck on a dead file system does), so the main process
waits in next() and its steps stop. Prints `loaded STEPS batches rank R attempt A` at the end.

    dataloader_hang_worker.py STEPS HANG_RANK HANG_STEP
"""
import os
import sys
import time

import torch
from torch.utils.data import DataLoader, Dataset

import mxrun

steps, hang_rank, hang_step = (int(a) for a in sys.argv[1:4])
rank = int(os.environ["RANK"])
attempt = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))


class Numbers(Dataset):
    def __len__(self):
        return steps

    def __getitem__(self, index):
        if rank == hang_rank and attempt == 0 and index == hang_step - 1:
            while True:  # in the loader process: the main process waits for this batch
                time.sleep(3600)
        time.sleep(0.02)
        return torch.full((4,), float(index))


loader = DataLoader(Numbers(), batch_size=1, num_workers=1)
for step, batch in enumerate(loader, start=1):
    assert batch[0, 0].item() == step - 1
    mxrun.step_done(step)
print(f"loaded {steps} batches rank {rank} attempt {attempt}", flush=True)
