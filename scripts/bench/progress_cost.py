#!/usr/bin/env python3
"""The cost of one `mxrun.step_done(step)` call in a worker (issue 36's target: under 1% of a
10 ms step, i.e. under 100 us), measured where it runs: in a worker started by a real mxrun, whose
agent reads the reports, and, for comparison, with no mxrun at all (the no-op path).

  scripts/bench/progress_cost.py            (environment: MXRUN, default <repo>/build/bin/mxrun;
                                             PYTHON, default <repo>/.venv/bin/python3; CALLS)

Cases, each the median over 7 batches of CALLS calls (default 200000), per call:
  held back   steps back to back: all but one report per 50 ms are held back (a clock read and
              two comparisons), what a fast training loop pays
  sent        every call sends its report (the clock advanced by 60 ms a call; 50 batches of 100
              calls, so that none is dropped for a full buffer: the count is printed): the price
              of the one report per 50 ms, a line written to the agent's socket
  no mxrun    the script run without a launcher: every call returns at once
  automatic   what the automatic reports (python/mxrun/_auto_progress.py, for scripts that never
              call step_done) add to one optimizer.step() of SGD on one 4-element parameter: the
              hook install() sets (its Counter reporting through _progress.auto_step_done) on
              and off in alternate batches of AUTO_STEPS steps (default 20000), 15 of each, CPU
              time (time.process_time: another process on the cores does not count), the
              difference of the medians per step
  busy        what the busy clock (python/mxrun/_busy_time.py: the rank's own work per step, for
              the straggler report) adds on top of that to one training step of a small model
              (a forward of Linear(4, 1) and SGD's step): the automatic count alone and the count
              with the clock (which finds the model, then times it with its own hooks) in
              alternate batches, as above
Markdown on stdout.
"""
import os
import statistics
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CALLS = int(os.environ.get("CALLS", "200000"))
BATCHES = 7
# Reports per batch that fit the socket's buffer (each small send takes about 1 KiB of the
# sender's 208 KiB there), so none is dropped; more batches instead.
SENT_CALLS, SENT_BATCHES = 100, 50
AUTO_STEPS = int(os.environ.get("AUTO_STEPS", "20000"))


def per_call_us(fn, calls=CALLS, batches=BATCHES):
    samples = []
    for _ in range(batches):
        t0 = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - t0) / calls * 1e6)
        time.sleep(0.05)  # the agent reads what was sent before the next batch
    return statistics.median(samples)


def measure():
    """Runs in the worker: prints `case us` lines."""
    import mxrun
    from mxrun import _auto_progress, _progress

    # First, before any step_done of the script's own (which would silence the automatic ones).
    import torch
    parameter = torch.nn.Parameter(torch.zeros(4))
    parameter.grad = torch.ones(4)
    optimizer = torch.optim.SGD([parameter], lr=0.001)

    import importlib
    register = importlib.import_module("torch.optim.optimizer").register_optimizer_step_post_hook

    def optimizer_steps():
        began = time.process_time()
        for _ in range(AUTO_STEPS):
            optimizer.step()
        return (time.process_time() - began) / AUTO_STEPS * 1e6

    if _auto_progress.wanted():
        counter = _auto_progress.Counter(_progress.auto_step_done)
        without, hooked = [], []
        for _ in range(15):
            without.append(optimizer_steps())
            handle = register(counter.stepped)
            hooked.append(optimizer_steps())
            handle.remove()
        plain = statistics.median(without)
        print(f"auto {statistics.median(hooked) - plain:.3f}", flush=True)
        print(f"auto_step {plain:.3f}", flush=True)

        from mxrun import _busy_time
        model = torch.nn.Linear(4, 1)
        for p in model.parameters():
            p.grad = torch.zeros_like(p)
        sgd = torch.optim.SGD(model.parameters(), lr=0.0)
        x = torch.zeros(2, 4)

        def training_steps():
            began = time.process_time()
            for _ in range(AUTO_STEPS):
                model(x)
                sgd.step()
            return (time.process_time() - began) / AUTO_STEPS * 1e6

        alone, timed = [], []
        for _ in range(15):
            handle = register(_auto_progress.Counter(_progress.auto_step_done).stepped)
            alone.append(training_steps())
            handle.remove()
            clock = _busy_time._clock = _busy_time.BusyClock()  # what the reports take from
            handle = register(_auto_progress.Counter(_progress.auto_step_done,
                                                     clock.step_ended).stepped)
            timed.append(training_steps())
            handle.remove()
            clock.stop()
            _busy_time._clock = None
        counted = statistics.median(alone)
        print(f"busy {statistics.median(timed) - counted:.3f}", flush=True)
        print(f"busy_step {counted:.3f}", flush=True)

    def held_back():
        for step in range(1, CALLS + 1):
            mxrun.step_done(step)

    def baseline():
        for step in range(1, CALLS + 1):
            pass

    loop = per_call_us(baseline)
    print(f"held_back {per_call_us(held_back) - loop:.3f}", flush=True)
    reporter = _progress._progress
    if reporter is not None:
        fake = [0.0]

        def clock():
            fake[0] += 0.06
            return fake[0]

        class Counting:  # the real channel, counting what a full buffer dropped
            dropped = 0

            def send(self, line):
                ok = reporter._channel.send(line)
                Counting.dropped += not ok
                return ok

        sending = _progress.Progress(Counting(), clock=clock)

        def sent():
            for step in range(1, SENT_CALLS + 1):
                sending.step_done(step)

        print(f"sent {per_call_us(sent, SENT_CALLS, SENT_BATCHES) - loop:.3f}", flush=True)
        print(f"dropped {Counting.dropped}", flush=True)
        mxrun.step_done(0)


def main():
    if os.environ.get("PROGRESS_COST_WORKER") == "1":
        measure()
        return
    mxrun_bin = os.environ.get("MXRUN", os.path.join(REPO, "build/bin/mxrun"))
    python = os.environ.get("PYTHON", os.path.join(REPO, ".venv/bin/python3"))
    env = dict(os.environ, PROGRESS_COST_WORKER="1", PYTHON_EXEC=python,
               PYTHONPATH=os.path.join(REPO, "python"))
    env.pop("MXRUN_CONTROL_FD", None)
    me = os.path.abspath(__file__)
    under = subprocess.run([mxrun_bin, "--standalone", "--nproc_per_node=1", me], env=env,
                           capture_output=True, text=True, timeout=600)
    alone = subprocess.run([python, me], env=env, capture_output=True, text=True, timeout=600)
    if under.returncode != 0 or alone.returncode != 0:
        sys.exit(f"progress_cost: a run failed:\n{under.stderr[-2000:]}\n{alone.stderr[-2000:]}")

    def figures(out):
        found = {}
        for line in out.splitlines():
            parts = line.rsplit(" ", 1)
            if len(parts) == 2 and parts[0].split()[-1] in ("held_back", "sent", "dropped",
                                                            "auto", "auto_step", "busy",
                                                            "busy_step"):
                found[parts[0].split()[-1]] = float(parts[1])
        return found

    m, a = figures(under.stdout), figures(alone.stdout)
    print("### The cost of mxrun.step_done per call\n")
    print(f"- command: `CALLS={CALLS} scripts/bench/progress_cost.py`")
    print(f"- date: {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}; nproc={os.cpu_count()};"
          f" python: {python}; mxrun: {mxrun_bin}")
    print(f"- per call, the loop's own cost taken out; median of {BATCHES} batches of {CALLS} "
          "calls\n")
    print("| case | us per call | share of a 10 ms step | target |")
    print("|---|---:|---:|---:|")
    for label, value in (("under mxrun, held back (back-to-back steps)", m.get("held_back")),
                         ("under mxrun, sent (one report)", m.get("sent")),
                         ("no mxrun (no-op)", a.get("held_back")),
                         ("under mxrun, automatic (optimizer hook), per optimizer.step()",
                          m.get("auto")),
                         ("under mxrun, the busy clock on top, per training step",
                          m.get("busy"))):
        if value is None:
            print(f"| {label} | — | | |")
        else:
            target = "< 0.1%" if "automatic" in label or "busy" in label else "< 1%"  # 56, 36
            print(f"| {label} | {value:.3f} | {value / 10000 * 100:.4f}% | {target} |")
    print(f"\nReports dropped for a full socket in the sent case: {m.get('dropped', 0):.0f} "
          f"of {SENT_BATCHES * SENT_CALLS}. The automatic case's optimizer.step() itself: "
          + (f"{m['auto_step']:.2f} us" if "auto_step" in m else "not measured")
          + "; the busy case's training step with the count alone: "
          + (f"{m['busy_step']:.2f} us" if "busy_step" in m else "not measured"))


if __name__ == "__main__":
    main()
