"""What the framework jobs beside this file share: their command line, the test's kill, and
their end. Imported from the job's folder (first on sys.path when a launcher runs the job)."""
import argparse
import json
import os
import signal
import sys
import time


def parse_args():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--ckpt_dir", required=True)
    p.add_argument("--ckpt_every", type=int, default=5)
    p.add_argument("--step_sleep", type=float, default=0.05)
    p.add_argument("--kill_rank", type=int, default=-1,
                   help="tests: this rank SIGKILLs itself after --kill_step, in the first attempt")
    p.add_argument("--kill_step", type=int, default=0)
    return p.parse_args()


def record(event, global_step):
    """Rank 0's log line: {"event": ..., "global_step": N, "time": <unix seconds>}."""
    print(json.dumps({"event": event, "global_step": global_step, "time": time.time()}),
          flush=True)


def maybe_kill(args, rank, step):
    """The test's failure: `rank` SIGKILLs itself after `step` when the flags say so, in the
    first attempt only."""
    first_attempt = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0") == "0"
    if first_attempt and rank == args.kill_rank and step == args.kill_step:
        os.kill(os.getpid(), signal.SIGKILL)


def leave():
    """Ends the process without the interpreter's teardown, where PyTorch 2.13's Gloo aborts now
    and then ("terminate called without an active exception", SIGABRT: 1 run in 6 of the Trainer
    job under torchrun 2.13 too; destroy_process_group first hung 2 runs in 8 instead). The job is
    done and its output written: the tests judge the launcher, not that teardown."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
