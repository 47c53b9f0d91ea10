"""A plain PyTorch DDP script as a user writes it (nothing of mxrun in it): a small regression
model, DDP over Gloo on the CPU across the launcher's ranks, SGD; each batch takes --step_sleep
seconds to load (job_common.step_sleep: --slow_rank R makes rank R's loading --slow_factor times
as long, a slow input pipeline). Rank 0 prints {"event": "fit_start", ...} and {"event": "step",
"global_step": N, ...} after each optimizer step. --ckpt_dir is taken, as by the other jobs, and
not written.
"""
import time

import torch
import torch.distributed as dist

from job_common import leave, parse_args, record, step_sleep


def main():
    args = parse_args()
    dist.init_process_group("gloo")
    torch.manual_seed(0)
    model = torch.nn.parallel.DistributedDataParallel(
        torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1)))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    rank = dist.get_rank()
    if rank == 0:
        record("fit_start", 0)
    loading = step_sleep(args)
    for step in range(1, args.steps + 1):
        time.sleep(loading)
        x, y = torch.randn(32, 16), torch.randn(32, 1)
        loss = torch.nn.functional.mse_loss(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if rank == 0:
            record("step", step)
    leave()


if __name__ == "__main__":
    main()
