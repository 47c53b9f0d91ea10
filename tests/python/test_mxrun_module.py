"""Unit tests of the mxrun module (python/mxrun): progress reports, the control channel's checks,
portability without mxrun, `python -m mxrun`. Real sockets and processes, fake clocks, no sleeps.
Run by ctest as `python -m unittest discover -s tests/python` with PYTHONPATH=python and MXRUN_BIN
set to the built launcher."""
import json
import os
import socket
import subprocess
import sys
import unittest

import mxrun
from mxrun import _channel, _group_sockets, _groups, _nccl, _progress, _rounds, _state

PYTHON_DIR = os.path.dirname(os.path.dirname(os.path.abspath(mxrun.__file__)))


class FakeClock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


class FakeChannel:
    def __init__(self):
        self.lines = []

    def send(self, line):
        self.lines.append(json.loads(line))
        return True


def child_env(**extra):
    env = {k: v for k, v in os.environ.items() if k != _channel.VARIABLE}
    env["PYTHONPATH"] = PYTHON_DIR
    env.update(extra)
    return env


class ProgressTest(unittest.TestCase):
    def setUp(self):
        self.clock, self.channel = FakeClock(), FakeChannel()
        self.progress = _progress.Progress(self.channel, clock=self.clock)

    def test_reports_at_most_one_line_per_interval_with_the_mean_step_time(self):
        self.progress.step_done(1)
        self.assertEqual(self.channel.lines, [{"step": 1}])  # no step time yet
        for step in (2, 3, 4):
            self.clock.now += 0.01
            self.progress.step_done(step)
        self.assertEqual(len(self.channel.lines), 1)  # held back: within 50 ms
        self.clock.now += 0.03  # 60 ms after step 1: step 5 goes, 4 steps in 60 ms
        self.progress.step_done(5)
        self.assertEqual(self.channel.lines[-1]["step"], 5)
        self.assertAlmostEqual(self.channel.lines[-1]["step_seconds"], 0.015, places=6)

    def test_the_step_held_back_is_sent_at_flush(self):
        self.progress.step_done(1)
        self.clock.now += 0.01
        self.progress.step_done(2)
        self.progress.flush()
        self.assertEqual([line["step"] for line in self.channel.lines], [1, 2])
        self.progress.flush()  # nothing pending: nothing sent
        self.assertEqual(len(self.channel.lines), 2)

    def test_steps_count_up_by_themselves_and_may_go_back(self):
        for _ in range(3):
            self.clock.now += 1
            self.progress.step_done()
        self.assertEqual([line["step"] for line in self.channel.lines], [1, 2, 3])
        self.clock.now += 1
        self.progress.step_done(1)  # after a restore
        self.assertEqual(self.channel.lines[-1], {"step": 1})  # no step time across it

    def test_restart_timing_drops_the_interval(self):
        self.progress.step_done(1)
        self.clock.now += 5  # an evaluation
        self.progress.restart()
        self.progress.step_done(2)
        self.assertEqual(self.channel.lines[-1], {"step": 2})

    def test_integers_of_other_libraries_are_taken_and_other_values_refused(self):
        class Index:  # what numpy's and torch's integers offer
            def __index__(self):
                return 7

        self.progress.step_done(Index())
        self.assertEqual(self.channel.lines[-1], {"step": 7})
        for bad in (1.5, "3", True):
            with self.assertRaisesRegex(TypeError, "step must be an integer"):
                self.progress.step_done(bad)
        with self.assertRaisesRegex(ValueError, "step must be >= 0, got -1"):
            self.progress.step_done(-1)

    def test_a_forked_child_sends_nothing(self):
        mine, agents = socket.socketpair()
        self.addCleanup(mine.close)
        self.addCleanup(agents.close)
        progress = _progress.Progress(_channel.Channel(mine), clock=self.clock)
        pid = os.fork()
        if pid == 0:  # a data loader's worker, say
            try:
                progress.step_done(5)
                progress.flush()
            finally:
                os._exit(0)
        os.waitpid(pid, 0)
        progress.step_done(6)
        agents.settimeout(5)
        self.assertEqual(agents.recv(4096), b'{"step": 6}\n')


class ChannelTest(unittest.TestCase):
    def refused(self, value):
        warnings = []
        self.assertIsNone(_channel.open_from_environment({_channel.VARIABLE: value},
                                                         warn=warnings.append))
        self.assertEqual(len(warnings), 1)
        return warnings[0]

    def test_no_variable_no_channel_and_no_warning(self):
        warnings = []
        self.assertIsNone(_channel.open_from_environment({}, warn=warnings.append))
        self.assertIsNone(_channel.open_from_environment({_channel.VARIABLE: ""},
                                                         warn=warnings.append))
        self.assertEqual(warnings, [])

    def test_what_is_not_a_channel_is_named_and_refused(self):
        self.assertIn("is not a file descriptor number", self.refused("three"))
        self.assertIn("is not a file descriptor number", self.refused("-1"))
        r, w = os.pipe()
        try:
            self.assertIn("is not a socket", self.refused(str(r)))
        finally:
            os.close(r)
            os.close(w)
        self.assertIn("is not an open file descriptor in this process", self.refused(str(r)))
        udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            self.assertIn("is not a Unix stream socket", self.refused(str(udp.fileno())))
        finally:
            udp.close()

    def test_a_socket_held_by_a_process_that_did_not_start_us_is_refused(self):
        mine, other = socket.socketpair()  # its peer is this very process, not an ancestor
        try:
            message = self.refused(str(mine.fileno()))
            self.assertIn(f"is held by pid {os.getpid()}, which did not start this process",
                          message)
        finally:
            mine.close()
            other.close()

    def test_a_channel_from_the_parent_carries_the_childs_steps(self):
        parent_end, child_end = socket.socketpair()
        with parent_end, child_end:
            code = "import mxrun, sys; mxrun.step_done(7); print('torch' in sys.modules)"
            r = subprocess.run([sys.executable, "-c", code], pass_fds=[child_end.fileno()],
                               env=child_env(**{_channel.VARIABLE: str(child_end.fileno())}),
                               capture_output=True, text=True, timeout=60)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(r.stderr, "")
            self.assertEqual(r.stdout.strip(), "False")  # it never imports torch
            parent_end.settimeout(5)
            # At its exit it says it is leaving, last (agent/workers/survivors_leave.h).
            self.assertEqual(parent_end.recv(4096), b'{"step": 7}\n{"leaving": true}\n')

    def test_a_closed_channel_is_dropped_quietly(self):
        mine, agents = socket.socketpair()
        agents.close()
        with mine:
            channel = _channel.Channel(mine)
            self.assertFalse(channel.send('{"step": 1}'))
            self.assertTrue(channel.closed)
            self.assertFalse(channel.send('{"step": 2}'))


class RoundNoticeTest(unittest.TestCase):
    def test_a_notice_is_read_with_its_contract(self):
        n = _rounds.parse_notice('{"round": 3, "env": {"RANK": "1"}, "failure_time": 12.5}')
        self.assertEqual((n.round, n.env, n.failure_time), (3, {"RANK": "1"}, 12.5))

    def test_what_is_not_a_notice_is_named(self):
        for line, why in (("{", "is not JSON"), ('{"step": 1}', 'expected "round"'),
                          ('{"round": -1, "env": {}}', "non-negative integer"),
                          ('{"round": 1}', 'needs "env"'),
                          ('{"round": 1, "env": {"RANK": 1}}', 'needs "env"'),
                          ('{"round": 1, "env": {}, "failure_time": true}', "must be a number")):
            with self.assertRaisesRegex(ValueError, why):
                _rounds.parse_notice(line)


class RoundListenerTest(unittest.TestCase):
    def setUp(self):
        self.agent, worker = socket.socketpair()
        self.addCleanup(self.agent.close)
        self.reader = worker.makefile("rb")
        worker.close()
        self.addCleanup(self.reader.close)
        self.warnings = []

    def listener(self):
        return _rounds.RoundListener(self.reader, warn=self.warnings.append)

    def test_on_notice_runs_on_the_listeners_thread_as_each_notice_comes(self):
        import threading
        a, b = socket.socketpair()
        seen = []
        done = threading.Event()

        def on_notice(notice):
            seen.append((notice.round, threading.current_thread().name))
            done.set()

        listener = _rounds.RoundListener(b.makefile("rb"), on_notice=on_notice)
        a.sendall(b'{"round": 4, "env": {"RANK": "0"}}\n')
        self.assertTrue(done.wait(10))
        self.assertEqual(seen, [(4, "mxrun-rounds")])
        self.assertTrue(listener.pending())  # still there for the training thread to take
        a.close()
        b.close()

    def test_the_newest_notice_is_taken_and_a_bad_line_is_skipped(self):
        listener = self.listener()
        self.agent.sendall(b'not json\n{"round": 1, "env": {"RANK": "0"}}\n'
                           b'{"round": 2, "env": {"RANK": "1"}}\n')
        self.agent.close()  # the job ended: the listener sees the end after the lines
        notice = None
        while notice is None or notice.round != 2:
            notice = listener.take(timeout=10)
            self.assertIsNotNone(notice)
        self.assertEqual(notice.env, {"RANK": "1"})
        self.assertFalse(listener.pending())
        self.assertIsNone(listener.take(timeout=10))  # closed: nothing more comes
        self.assertTrue(listener.closed)
        self.assertEqual(len(self.warnings), 1)
        self.assertIn("a control line is not JSON", self.warnings[0])


class GroupPlanTest(unittest.TestCase):
    """`_groups.plan`: which store a round's group lives on, from every rank's hello."""

    def test_survivors_keep_their_group_while_its_store_lives(self):
        s = "10.0.0.1:29500"
        hellos = [{"pg": s, "hosts": s}, {"pg": "", "hosts": ""}, {"pg": s, "hosts": ""}]
        self.assertEqual(_groups.plan(hellos), s)  # rank 1 is new: it joins the group on s

    def test_a_new_group_when_the_store_died_with_its_host(self):
        s = "10.0.0.1:29500"
        self.assertIsNone(_groups.plan([{"pg": "", "hosts": ""}, {"pg": s, "hosts": ""}]))

    def test_a_new_group_in_the_first_round(self):
        self.assertIsNone(_groups.plan([{"pg": "", "hosts": ""}, {"pg": "", "hosts": ""}]))

    def test_a_survivor_claims_its_store_only_where_the_others_can_reach_it(self):
        old, new = "10.0.0.1:5000", "10.0.0.1:6000"
        up = lambda address: True
        down = lambda address: False
        # Its own process hosts it (global rank 0's store).
        self.assertEqual(_groups.claimed_store(old, new, True, False, down), old)
        # An agent's store of an earlier round, still open.
        self.assertEqual(_groups.claimed_store(old, new, False, True, up), old)
        # The node whose agent hosted it was lost.
        self.assertEqual(_groups.claimed_store(old, new, False, True, down), "")
        # A fixed --master_port: the round's store took the port over, the old one is closed.
        self.assertEqual(_groups.claimed_store(new, new, False, True, up), "")
        # Rank 0's store, in another process (it hosts it): not this rank's to claim.
        self.assertEqual(_groups.claimed_store(old, new, False, False, up), "")
        # No group yet.
        self.assertEqual(_groups.claimed_store(None, new, False, True, up), "")

    def test_a_new_group_when_survivors_are_on_different_stores(self):
        a, b = "10.0.0.1:29500", "10.0.0.2:29500"
        self.assertIsNone(_groups.plan([{"pg": a, "hosts": a}, {"pg": b, "hosts": ""}]))

    def test_the_variable_is_checked_and_off_by_default(self):
        saved = os.environ.pop("MXRUN_RECONFIGURE", None)
        try:
            self.assertFalse(_groups.reconfigure_wanted(None))
            self.assertFalse(_groups.reconfigure_wanted(False))
            os.environ["MXRUN_RECONFIGURE"] = "yes"
            with self.assertRaisesRegex(ValueError, "MXRUN_RECONFIGURE must be 0 or 1, got 'yes'"):
                _groups.reconfigure_wanted(None)
        finally:
            os.environ.pop("MXRUN_RECONFIGURE", None)
            if saved is not None:
                os.environ["MXRUN_RECONFIGURE"] = saved

    def test_asked_for_where_pytorch_lacks_it_warns_and_makes_new_groups(self):
        code = ("import sys, torch.distributed as d; from mxrun import _groups; "
                "print(hasattr(d, '_reconfigure'), _groups.reconfigure_wanted(True))")
        r = subprocess.run([sys.executable, "-c", code], env=child_env(), capture_output=True,
                           text=True, timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        has, wanted = r.stdout.split()
        self.assertEqual(wanted, has)  # used exactly where this PyTorch has it
        if has == "False":
            self.assertIn("has no torch.distributed._reconfigure (2.14 and later): re-forming "
                          "groups anew instead", r.stderr)


class StateShapeTest(unittest.TestCase):
    """`_state.strip` and `fill`: a state_dict's tensors out and back in, the rest untouched."""

    def test_a_model_and_an_adam_state_come_back_whole(self):
        import torch
        model = torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.BatchNorm1d(2))
        adam = torch.optim.Adam(model.parameters(), lr=0.1)
        model(torch.randn(4, 3)).sum().backward()
        adam.step()
        dicts = {"model": model.state_dict(), "optimizer": adam.state_dict()}
        tensors = []
        shape = _state.strip(dicts, tensors)
        slots = _state.slots(shape)
        self.assertEqual([s.index for s in slots], list(range(len(tensors))))
        # the model's 7 (linear weight and bias, BatchNorm's weight, bias and 3 buffers), and
        # Adam's exp_avg, exp_avg_sq and step for each of the 4 parameters
        self.assertEqual(len(tensors), 7 + 3 * 4)
        self.assertTrue(all(s.on_cpu for s in slots))
        step = adam.state_dict()["state"][0]["step"]
        self.assertEqual(step.dim(), 0)  # Adam's step counter: a 0-d tensor on the CPU
        back = _state.fill(shape, [t.clone() for t in tensors])
        self.assertEqual(back["optimizer"]["param_groups"], dicts["optimizer"]["param_groups"])
        for key, value in dicts["model"].items():
            self.assertTrue(torch.equal(back["model"][key], value), key)
        restored = torch.optim.Adam(model.parameters(), lr=0.1)
        restored.load_state_dict(back["optimizer"])  # accepted as Adam's own
        self.assertTrue(torch.equal(restored.state_dict()["state"][0]["exp_avg"],
                                    adam.state_dict()["state"][0]["exp_avg"]))


class RngTest(unittest.TestCase):
    def test_the_generators_go_on_where_the_state_was_taken(self):
        import random
        import torch
        torch.manual_seed(5)
        random.seed(5)
        rng = mxrun.RNG()
        taken = rng.state_dict()
        first = (torch.rand(3).tolist(), random.random())
        torch.rand(7)  # the process draws on
        random.random()
        tensors = []
        shape = _state.strip(taken, tensors)  # as _state.share sends it
        rng.load_state_dict(_state.fill(shape, [t.clone() for t in tensors]))
        self.assertEqual((torch.rand(3).tolist(), random.random()), first)


class GroupSocketsTest(unittest.TestCase):
    def test_leaving_a_group_closes_its_connections_and_keeps_listeners(self):
        server = socket.create_server(("127.0.0.1", 0))  # there before: not the group's
        opening = _group_sockets.Opening()
        listener = socket.create_server(("127.0.0.1", 0))  # the group's own: left listening
        mine = socket.create_connection(server.getsockname())
        peer, _ = server.accept()  # the other process's end, as it were
        opened = opening.opened()
        inode = lambda s: os.fstat(s.fileno()).st_ino  # noqa: E731
        self.assertEqual(opened, {inode(listener), inode(mine), inode(peer)})
        self.assertEqual(_group_sockets.shut_down(opened - {inode(peer)}), 1)
        peer.settimeout(10)
        self.assertEqual(peer.recv(1), b"")  # the peer blocked on us is let go
        late = socket.create_connection(listener.getsockname())  # still listening
        late.close()
        for s in (server, listener, mine, peer):
            s.close()


class NcclPathTest(unittest.TestCase):
    """`_nccl`: what the NCCL path does, as far as a machine without a GPU can check it."""

    def test_which_backends_are_nccl(self):
        for backend in ("nccl", "NCCL", "cpu:gloo,cuda:nccl"):
            self.assertTrue(_nccl.uses_nccl(backend), backend)
        for backend in ("gloo", "mpi", None):
            self.assertFalse(_nccl.uses_nccl(backend), backend)

    def test_the_watchdog_keeps_the_process_unless_the_script_said_otherwise(self):
        warnings = []
        env = {}
        _nccl.prepare_environment(env, warnings.append)
        self.assertEqual(env, {"TORCH_NCCL_ASYNC_ERROR_HANDLING": "2",
                               "TORCH_NCCL_RETHROW_CUDA_ERRORS": "0"})
        self.assertEqual(warnings, [])
        env = {"TORCH_NCCL_ASYNC_ERROR_HANDLING": "0", "TORCH_NCCL_RETHROW_CUDA_ERRORS": "1"}
        _nccl.prepare_environment(env, warnings.append)
        self.assertEqual(env["TORCH_NCCL_ASYNC_ERROR_HANDLING"], "0")  # the script's own
        self.assertEqual(env["TORCH_NCCL_RETHROW_CUDA_ERRORS"], "1")
        self.assertEqual(warnings, [])
        for ending in ("1", "3"):
            warnings.clear()
            _nccl.prepare_environment({"TORCH_NCCL_ASYNC_ERROR_HANDLING": ending},
                                      warnings.append)
            self.assertEqual(len(warnings), 1)
            self.assertIn(f"TORCH_NCCL_ASYNC_ERROR_HANDLING={ending} makes PyTorch end this "
                          "process", warnings[0])

    def test_an_optimizer_step_is_refused_once_a_notice_came(self):
        import torch
        weight = torch.nn.Parameter(torch.ones(3))
        sgd = torch.optim.SGD([weight], lr=0.5)
        calls, pending = [], [False]
        guards = _nccl.guard_optimizer_steps({"model": torch.nn.Linear(1, 1), "optimizer": sgd},
                                             lambda: pending[0], lambda: calls.append("sync"),
                                             _rounds.RoundPending)
        self.assertEqual(len(guards), 1)  # the optimizer's, not the module's
        weight.grad = torch.ones(3)
        sgd.step()  # no notice: the step is taken
        self.assertEqual(weight.tolist(), [0.5, 0.5, 0.5])
        self.assertEqual(calls, ["sync"])  # the GPU's work awaited first
        pending[0] = True  # a notice came while the step's all-reduce ran
        with self.assertRaises(_rounds.RoundPending):
            sgd.step()
        self.assertEqual(weight.tolist(), [0.5, 0.5, 0.5])  # its gradients were not applied
        self.assertEqual(calls, ["sync", "sync"])
        for guard in guards:
            guard.remove()
        sgd.step()  # the hooks are gone
        self.assertEqual(weight.tolist(), [0.0, 0.0, 0.0])

    def test_nothing_to_abort_without_a_group(self):
        self.assertFalse(_nccl.abort_communicators())


class WithoutMxrunTest(unittest.TestCase):
    def test_every_call_is_a_no_op_without_mxrun(self):
        code = "import mxrun\nfor s in range(1000): mxrun.step_done(s)\nmxrun.restart_timing()"
        r = subprocess.run([sys.executable, "-c", code], env=child_env(), capture_output=True,
                           text=True, timeout=60)
        self.assertEqual((r.returncode, r.stdout, r.stderr), (0, "", ""))

    def test_a_variable_without_its_descriptor_warns_once_and_runs_on(self):
        code = ("import mxrun\nfrom mxrun import _channel\nfor s in range(5): mxrun.step_done(s)\n"
                "assert _channel.shared() is None and _channel.shared() is None\nprint('done')")
        r = subprocess.run([sys.executable, "-c", code], env=child_env(**{_channel.VARIABLE: "9"}),
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 0)
        self.assertEqual(r.stdout, "done\n")
        self.assertEqual(r.stderr.count("mxrun: MXRUN_CONTROL_FD='9' is not an open file "
                                        "descriptor"), 1, r.stderr)


class LauncherTest(unittest.TestCase):
    def test_python_dash_m_mxrun_runs_the_launcher_of_the_same_version(self):
        mxrun_bin = os.environ.get("MXRUN_BIN")
        self.assertTrue(mxrun_bin, "MXRUN_BIN must name the built mxrun (ctest sets it)")
        env = child_env(PATH=os.path.dirname(mxrun_bin) + os.pathsep + os.environ["PATH"])
        r = subprocess.run([sys.executable, "-m", "mxrun", "--version"], env=env,
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.split()[:2], ["mxrun", mxrun.__version__])

    def test_python_dash_m_mxrun_without_the_launcher_says_so(self):
        if os.path.exists(os.path.join(os.path.dirname(sys.executable), "mxrun")):
            self.skipTest("an mxrun is installed beside this Python")
        env = child_env(PATH="/nonexistent")
        r = subprocess.run([sys.executable, "-m", "mxrun", "--version"], env=env,
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 2)
        self.assertIn("the mxrun program is neither beside this Python", r.stderr)


if __name__ == "__main__":
    unittest.main()
