"""Progress with no code change (python/mxrun/_auto_progress.py): each case is a fresh interpreter
whose site directory holds the wheel's mxrun-auto-progress.pth (python/), as `pip install mxrun`
leaves it, given a channel as mxrun gives one; the steps it reports are read from the other end.
Real torch optimizers; no launcher."""
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import textwrap
import unittest

import mxrun
from mxrun import _auto_progress, _channel

PYTHON_DIR = os.path.dirname(os.path.dirname(os.path.abspath(mxrun.__file__)))
PTH = os.path.join(PYTHON_DIR, "mxrun-auto-progress.pth")

# Before the script: what the interpreter's start imported (the .pth must not import torch).
PRELUDE = """\
import site, sys
site.addsitedir(sys.argv[1])
print("at start:", "torch" in sys.modules, "mxrun" in sys.modules, flush=True)
if "mxrun" in sys.modules:
    sys.modules["mxrun._progress"].MIN_INTERVAL = 0  # every step sent as it completes
import torch
torch.manual_seed(0)
model = torch.nn.Linear(4, 1)
def backward():
    model(torch.randn(8, 4)).pow(2).mean().backward()
"""


class AutoProgressTest(unittest.TestCase):
    def setUp(self):
        self.site = tempfile.mkdtemp(prefix="mxrun-site.")
        self.addCleanup(shutil.rmtree, self.site)
        shutil.copy(PTH, self.site)

    def run_script(self, body, channel=True, **env):
        """(stdout, [reported step numbers]) of PRELUDE + body in a fresh interpreter."""
        ours, theirs = socket.socketpair()
        with ours, theirs:
            child = {k: v for k, v in os.environ.items()
                     if k not in (_channel.VARIABLE, _auto_progress.VARIABLE)}
            child["PYTHONPATH"] = PYTHON_DIR  # mxrun where the .pth's import finds it
            if channel:
                child[_channel.VARIABLE] = str(theirs.fileno())
            child.update(env)
            code = PRELUDE + textwrap.dedent(body)
            r = subprocess.run([sys.executable, "-c", code, self.site],
                               pass_fds=[theirs.fileno()], env=child, capture_output=True,
                               text=True, timeout=120)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.stderr = r.stderr
            theirs.close()
            ours.settimeout(10)
            data = b""
            while True:
                chunk = ours.recv(65536)
                if not chunk:
                    break
                data += chunk
        reports = [json.loads(line) for line in data.decode().splitlines()]
        if reports:  # at its exit the interpreter says it is leaving, after its last report
            self.assertEqual(reports[-1], {"leaving": True})
            self.assertNotIn({"leaving": True}, reports[:-1])
            reports = reports[:-1]
        self.reports = reports
        # The automatic ones say so (the agent's first-step rule waits for hang detection asked).
        steps = [(r["step"] if r.get("auto") is True else ("own", r["step"])) for r in reports]
        return r.stdout, steps

    def test_each_optimizer_step_is_a_step_and_nothing_is_imported_at_start(self):
        out, steps = self.run_script("""
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            for _ in range(3):
                backward(); optimizer.step(); optimizer.zero_grad()
        """)
        self.assertIn("at start: False True", out)  # mxrun's module, never torch
        self.assertEqual(steps, [1, 2, 3])

    def test_outside_mxrun_and_turned_off_nothing_happens(self):
        body = """
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            backward(); optimizer.step()
            print("hooked:", __import__("mxrun._auto_progress")._auto_progress._counter is not None
                  if "mxrun" in sys.modules else False)
        """
        out, steps = self.run_script(body, channel=False)
        self.assertIn("at start: False False", out)  # not even mxrun's module is imported
        self.assertEqual(steps, [])
        out, steps = self.run_script(body, **{_auto_progress.VARIABLE: "0"})
        self.assertIn("at start: False False", out)
        self.assertIn("hooked: False", out)
        self.assertEqual(steps, [])

    def test_gradient_accumulation_counts_optimizer_steps(self):
        _, steps = self.run_script("""
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            for _ in range(2):
                for _ in range(4):
                    backward()
                optimizer.step(); optimizer.zero_grad()
        """)
        self.assertEqual(steps, [1, 2])

    def test_only_the_first_optimizer_counts_until_it_is_gone(self):
        _, steps = self.run_script("""
            import gc
            other = torch.nn.Linear(4, 1)
            first = torch.optim.SGD(model.parameters(), lr=0.1)
            second = torch.optim.SGD(other.parameters(), lr=0.1)
            for _ in range(2):
                backward(); other(torch.randn(2, 4)).sum().backward()
                first.step(); second.step()
            del first; gc.collect()
            second.step()
        """)
        self.assertEqual(steps, [1, 2, 3])

    def test_adam_s_own_step_goes_on_from_a_checkpoint(self):
        _, steps = self.run_script("""
            # A checkpoint of step 5, as a run before this process left it.
            resumed = torch.optim.Adam(model.parameters(), lr=0.1)
            saved = resumed.state_dict()
            saved["state"] = {i: {"step": torch.tensor(5.0), "exp_avg": torch.zeros_like(p),
                                  "exp_avg_sq": torch.zeros_like(p)}
                              for i, p in enumerate(model.parameters())}
            resumed.load_state_dict(saved)
            for _ in range(2):
                backward(); resumed.step(); resumed.zero_grad()
        """)
        self.assertEqual(steps, [6, 7])  # the optimizer's own steps, not 1 and 2 of its own

    def test_a_step_amp_skips_reports_the_same_step_again(self):
        _, steps = self.run_script("""
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            scaler = torch.amp.GradScaler("cpu")
            def scaled():
                scaler.scale(model(torch.randn(8, 4)).pow(2).mean()).backward()
            scaled(); scaler.step(optimizer); scaler.update(); optimizer.zero_grad()
            scaled(); model.weight.grad[0, 0] = float("inf")
            scaler.step(optimizer); scaler.update(); optimizer.zero_grad()
            scaled(); scaler.step(optimizer); scaler.update(); optimizer.zero_grad()
        """)
        self.assertEqual(steps, [1, 1, 2])

    def test_a_failing_count_never_fails_the_step_and_is_said_once(self):
        _, steps = self.run_script("""
            from mxrun import _auto_progress
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            backward(); optimizer.step()
            def broken(optimizer):
                raise RuntimeError("no state today")
            _auto_progress.state_step = broken
            for _ in range(3):
                backward(); optimizer.step()
            print("trained on")
        """)
        self.assertEqual(steps, [1])
        self.assertEqual(self.stderr.count("mxrun: the automatic progress reports stop "
                                           "(RuntimeError: no state today)"), 1, self.stderr)

    def test_each_report_from_the_second_step_on_carries_the_rank_s_own_work(self):
        _, steps = self.run_script("""
            import time

            class SlowBackward(torch.autograd.Function):  # a backward of 0.3 s
                @staticmethod
                def forward(ctx, x):
                    return x.view_as(x)

                @staticmethod
                def backward(ctx, grad):
                    time.sleep(0.3)
                    return grad

            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            for _ in range(4):
                time.sleep(0.05)  # the input
                SlowBackward.apply(model(torch.randn(8, 4))).pow(2).mean().backward()
                optimizer.step(); optimizer.zero_grad()
        """)
        self.assertEqual(steps, [1, 2, 3, 4])
        busy = [r.get("busy_seconds") for r in self.reports]
        self.assertIsNone(busy[0])  # no step before the first to count its input from
        for seconds, report in zip(busy[1:], self.reports[1:]):
            self.assertIsNotNone(seconds, self.reports)
            self.assertGreaterEqual(seconds, 0.05)  # the input's sleep, then the forward
            # Backward's 0.3 s left out: the step's time has it, the busy time not (a margin of
            # 0.2 s for a loaded machine's pauses, which either may catch).
            self.assertLess(seconds, report["step_seconds"] - 0.2, self.reports)

    def test_the_script_s_own_step_done_wins(self):
        _, steps = self.run_script("""
            import mxrun
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            backward(); optimizer.step()
            mxrun.step_done(100)
            for _ in range(2):
                backward(); optimizer.step()
        """)
        self.assertEqual(steps, [1, ("own", 100)])


if __name__ == "__main__":
    unittest.main()
