"""A worker for the tests of the mxrun module (tests/integration/python_module_test.cc): reports
STEPS steps, one every STEP_SECONDS, through mxrun.step_done, then sleeps THEN_SLEEP seconds
without reporting, and exits 0. Prints `step N rank R` as it goes.

    progress_worker.py STEPS STEP_SECONDS [THEN_SLEEP]
"""
import os
import sys
import time

import mxrun

steps, step_seconds = int(sys.argv[1]), float(sys.argv[2])
then_sleep = float(sys.argv[3]) if len(sys.argv) > 3 else 0.0
rank = os.environ.get("RANK", "?")
for step in range(1, steps + 1):
    time.sleep(step_seconds)
    mxrun.step_done(step)
    if step == 1 or step == steps:
        print(f"step {step} rank {rank}", flush=True)
if then_sleep > 0:
    print(f"silent rank {rank}", flush=True)
    time.sleep(then_sleep)
