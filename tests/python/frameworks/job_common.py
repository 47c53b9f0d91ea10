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
    p.add_argument("--hang_rank", type=int, default=-1,
                   help="tests: this rank stops (sleeps, alive) after --hang_step, in the first "
                        "attempt")
    p.add_argument("--hang_step", type=int, default=0)
    p.add_argument("--slow_rank", type=int, default=-1,
                   help="tests: this rank's --step_sleep is --slow_factor times as long, as on a "
                        "slower machine (a straggler)")
    p.add_argument("--slow_factor", type=float, default=3.0)
    return p.parse_args()


def step_sleep(args):
    """The seconds of work this rank (RANK) adds to each step: --step_sleep, times --slow_factor on
    --slow_rank."""
    if int(os.environ.get("RANK", "0")) == args.slow_rank:
        return args.step_sleep * args.slow_factor
    return args.step_sleep


def record(event, global_step):
    """Rank 0's log line: {"event": ..., "global_step": N, "time": <unix seconds>}."""
    print(json.dumps({"event": event, "global_step": global_step, "time": time.time()}),
          flush=True)


def maybe_fail(args, rank, step):
    """The test's failure, in the first attempt only, when the flags say so: `rank` SIGKILLs
    itself after `step` (--kill_rank), or stops there alive, as a rank stuck in a read or a
    deadlock (--hang_rank): its peers then wait in the next step's all-reduce."""
    if os.environ.get("TORCHELASTIC_RESTART_COUNT", "0") != "0":
        return
    if rank == args.kill_rank and step == args.kill_step:
        os.kill(os.getpid(), signal.SIGKILL)
    if rank == args.hang_rank and step == args.hang_step:
        time.sleep(3600)


def leave():
    """Ends the process without the interpreter's teardown, where PyTorch 2.13's Gloo aborts now
    and then ("terminate called without an active exception", SIGABRT: 1 run in 6 of the Trainer
    job under torchrun 2.13 too; destroy_process_group first hung 2 runs in 8 instead). The job is
    done and its output written: the tests judge the launcher, not that teardown."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
