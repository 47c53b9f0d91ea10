"""A worker for the goodput test of the mxrun module (tests/integration/python_module_test.cc):
a training loop with a setup phase, a checkpoint every 5 steps and one failure, reporting every
step through mxrun.step_done. Standard library only, so its times are its own.

    checkpoint_worker.py CKPT_DIR STEPS SETUP_SECONDS

Every process first sleeps SETUP_SECONDS (imports, data, model), then resumes from CKPT_DIR's
checkpoint (rank 0 writes the step every 5 steps) and steps every 0.05 s. On the first attempt
(TORCHELASTIC_RESTART_COUNT=0) rank 1 exits 7 once step 14 is reported and rank 0 stops stepping
there, so the failure comes at step 14 on both and the group resumes from 10: 4 steps redone.
Prints `setup S` with its own setup time, and `resumed from N`.
"""
import os
import sys
import time

import mxrun

ckpt_dir, steps, setup = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
rank = int(os.environ["RANK"])
attempt = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
t0 = time.monotonic()
time.sleep(setup)
path = os.path.join(ckpt_dir, "step")
start = int(open(path).read()) if os.path.exists(path) else 0
print(f"setup {time.monotonic() - t0:.3f} rank {rank} resumed from {start}", flush=True)
for step in range(start + 1, steps + 1):
    time.sleep(0.05)
    mxrun.step_done(step)
    if rank == 0 and step % 5 == 0:
        with open(path + ".tmp", "w") as f:
            f.write(str(step))
        os.replace(path + ".tmp", path)
    if attempt == 0 and step == 14:
        if rank == 1:
            sys.exit(7)  # the held-back report of step 14 leaves at exit
        time.sleep(60)  # rank 0 waits there to be stopped
