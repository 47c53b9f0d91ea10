"""A Gloo job in which one rank stops joining the collectives (tests/integration/flight_recorder_test.cc).

    python collective_hang_worker.py CULPRIT HANG_STEP [--heartbeat-file] [--timeout=S]

Every rank all-reduces once per step; rank CULPRIT sleeps at step HANG_STEP instead, so the
others wait in that step's all_reduce. Progress goes to mxrun through mxrun.step_done (which also
serves the flight recorder), or with --heartbeat-file only by touching MXRUN_HEARTBEAT_FILE (a
script that never imports mxrun). With --timeout=S the group's collectives give up after S
seconds (Gloo raises "Timed out waiting ..." in the ranks waiting for the culprit).
"""
import datetime
import os
import sys
import time

import torch
import torch.distributed as dist

culprit, hang_step = int(sys.argv[1]), int(sys.argv[2])
plain = "--heartbeat-file" in sys.argv[3:]
timeout = [float(a.split("=", 1)[1]) for a in sys.argv[3:] if a.startswith("--timeout=")]
if not plain:
    import mxrun
if timeout:
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=timeout[0]))
else:
    dist.init_process_group("gloo")
rank = dist.get_rank()
t = torch.ones(16)
for step in range(1, 100000):
    if rank == culprit and step == hang_step:
        time.sleep(300)
    dist.all_reduce(t)
    if plain:
        with open(os.environ["MXRUN_HEARTBEAT_FILE"], "a"):
            os.utime(os.environ["MXRUN_HEARTBEAT_FILE"])
    else:
        mxrun.step_done(step)
    time.sleep(0.01)
