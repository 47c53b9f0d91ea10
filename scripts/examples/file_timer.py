#!/usr/bin/env python3
"""PyTorch's own watchdog under mxrun (or torchrun): torch.distributed.elastic.timer's FileTimer.

With TORCHELASTIC_ENABLE_FILE_TIMER=1 in the launcher's environment, the launcher serves a named pipe
and exports its path as TORCHELASTIC_TIMER_FILE; code wrapped in `timer.expires(after=...)` that
overruns is killed by the launcher, which then restarts the group.

    TORCHELASTIC_ENABLE_FILE_TIMER=1 mxrun --nproc_per_node=2 --max_restarts=1 \\
        scripts/examples/file_timer.py --hang_rank 1

Every worker first acquires and releases a timer in time (nothing happens). Then `--hang_rank`
hangs inside a timer of `--expire_after` seconds on its first `--hang_attempts` attempts; the others
finish. `--bad_line` also writes a malformed request to the pipe, which the launcher must ignore.
`--events FILE` appends "<event> <rank> <attempt> <unix time>" lines (start, hang, done) for
benchmarks.
"""
import argparse
import os
import sys
import time


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--hang_rank", type=int, default=-1)
    parser.add_argument("--hang_attempts", type=int, default=1)
    parser.add_argument("--expire_after", type=float, default=1.0)
    parser.add_argument("--work", type=float, default=0.5, help="seconds of work before exiting")
    parser.add_argument("--bad_line", action="store_true")
    parser.add_argument("--events", default="")
    args = parser.parse_args()

    rank = int(os.environ["RANK"])
    attempt = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
    pipe = os.environ["TORCHELASTIC_TIMER_FILE"]

    def event(name: str) -> None:
        if args.events:
            with open(args.events, "a") as f:
                f.write(f"{name} {rank} {attempt} {time.time():.6f}\n")

    event("start")  # before importing PyTorch (about a second): when the launcher started us
    import torch.distributed.elastic.timer as timer

    timer.configure(timer.FileTimerClient(pipe))
    with timer.expires(after=5, scope="released in time"):
        time.sleep(0.05)
    print(f"rank {rank}: released a timer in time", flush=True)
    if args.bad_line:
        fd = os.open(pipe, os.O_WRONLY | os.O_NONBLOCK)
        os.write(fd, b'{"version": 1, "pid": "not a pid"}\n')
        os.close(fd)
    if rank == args.hang_rank and attempt < args.hang_attempts:
        with timer.expires(after=args.expire_after, scope="stuck step"):
            print(f"rank {rank}: hanging inside a {args.expire_after} s timer", flush=True)
            event("hang")
            time.sleep(3600)
    time.sleep(args.work)
    event("done")
    print(f"rank {rank}: done", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
