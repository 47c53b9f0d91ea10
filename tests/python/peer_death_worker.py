"""A worker for tests/integration/survivors_leave_test.cc: two ranks of a Gloo group all-reduce in
a loop and report each step to mxrun (mxrun.step_done). In the first attempt rank 1 exits 1 after
step 5; rank 0's next all-reduce then fails and it leaves by itself, through an exit that takes
SLOW_EXIT seconds (an atexit handler, as a framework's teardown; the mxrun module's atexit says
{"leaving": true} before it). Its SIGTERM handler takes 3 s, as PyTorch Lightning's does when it
broadcasts on the broken group, and prints "got SIGTERM". The next attempt ends at once.

    peer_death_worker.py SLOW_EXIT
"""
import atexit
import os
import signal
import sys
import time

import torch
import torch.distributed as dist

import mxrun

slow_exit = float(sys.argv[1])
rank = int(os.environ["RANK"])
if os.environ.get("TORCHELASTIC_RESTART_COUNT", "0") != "0":
    print(f"rank {rank} attempt 1", flush=True)
    sys.exit(0)


def on_sigterm(signum, frame):
    print(f"rank {rank} got SIGTERM", flush=True)
    time.sleep(3)
    os._exit(143)


signal.signal(signal.SIGTERM, on_sigterm)
# Registered before the module's own (at its first report): runs after it says it is leaving.
atexit.register(time.sleep, slow_exit)
dist.init_process_group("gloo")
tensor = torch.ones(4)
for step in range(1, 1000):
    dist.all_reduce(tensor)
    mxrun.step_done(step)
    if rank == 1 and step == 5:
        print("rank 1 dies", flush=True)
        os._exit(1)
    time.sleep(0.02)
