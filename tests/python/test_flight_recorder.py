"""The flight recorder's two Python halves: the worker's server (_flight_recorder.py: real sockets,
a real PyTorch Gloo group in a child process) and the verdict (_flight_verdict.py: dumps made up
here, and PyTorch's own analyzer run on them)."""
import io
import json
import os
import socket
import subprocess
import sys
import tempfile
import unittest
from contextlib import redirect_stdout

import mxrun
from mxrun import _flight_recorder, _flight_verdict

PYTHON_DIR = os.path.dirname(os.path.dirname(os.path.abspath(mxrun.__file__)))


def ask(path, request=b"fr_trace\n"):
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(30)
        s.connect(path)
        s.sendall(request)
        data = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                return data
            data += chunk


WORKER = r"""
import os, sys, torch, torch.distributed as dist
from mxrun import _flight_recorder
dist.init_process_group("gloo", init_method="file://" + sys.argv[1], rank=0, world_size=1)
dp = dist.new_group([0], group_desc="dp")
t = torch.ones(3)
dist.all_reduce(t)
dist.all_reduce(t, group=dp)
print(_flight_recorder.serve(), flush=True)
sys.stdin.read()  # until the test is done asking
"""


class ServerTest(unittest.TestCase):
    def test_a_worker_serves_its_collectives_with_stacks_and_its_groups(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "fr-0.sock")
            env = dict(os.environ, PYTHONPATH=PYTHON_DIR, MXRUN_FLIGHT_SOCKET=path,
                       TORCH_FR_BUFFER_SIZE="100", RANK="0")
            child = subprocess.Popen([sys.executable, "-c", WORKER, os.path.join(tmp, "store")],
                                     env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, text=True)
            try:
                self.assertEqual(child.stdout.readline().strip(), "True")
                header, _, body = ask(path).partition(b"\n")
                self.assertEqual(header, b"ok %d" % len(body))
                dump = json.loads(body)
                self.assertEqual(ask(path, b"what\n"),
                                 b"error unknown request (expected fr_trace)\n")
            finally:
                child.stdin.close()
                child.wait(timeout=30)
                child.stdout.close()
        names = [e["profiling_name"] for e in dump["entries"]]
        self.assertEqual(names, ["gloo:all_reduce", "gloo:all_reduce"])
        # Gloo leaves PyTorch's group table empty; the worker fills it from torch.distributed's.
        self.assertEqual(dump["pg_config"]["0"], {"name": "0", "desc": "default_pg", "ranks": "[0]"})
        self.assertEqual(dump["pg_config"]["1"]["desc"], "dp")
        self.assertEqual(dump["mxrun"]["rank"], 0)
        self.assertTrue(any(f["name"] == "all_reduce" for f in dump["entries"][0]["frames"]))

    def test_a_worker_dying_of_an_exception_leaves_its_dump_and_one_that_ends_well_does_not(self):
        script = r"""
import sys, torch, torch.distributed as dist
from mxrun import _flight_recorder
dist.init_process_group("gloo", init_method="file://" + sys.argv[1], rank=0, world_size=1)
dist.all_reduce(torch.ones(2))
_flight_recorder.serve()
if sys.argv[2] == "raise":
    raise RuntimeError("Timed out waiting 3000ms for recv operation to complete")
if sys.argv[2] == "other":
    raise ValueError("a bad batch")  # not a collective's: no dump, no delay
dist.destroy_process_group()
"""
        for how, left in (("raise", True), ("other", False), ("return", False)):
            with self.subTest(how=how), tempfile.TemporaryDirectory() as tmp:
                path = os.path.join(tmp, "fr-0.sock")
                env = dict(os.environ, PYTHONPATH=PYTHON_DIR, MXRUN_FLIGHT_SOCKET=path,
                           TORCH_FR_BUFFER_SIZE="10")
                subprocess.run([sys.executable, "-c", script, os.path.join(tmp, "store"), how],
                               env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               timeout=60)
                exit_dump = path + _flight_recorder.EXIT_SUFFIX
                self.assertEqual(os.path.exists(exit_dump), left)
                if left:
                    with open(exit_dump) as f:
                        entries = json.load(f)["entries"]
                    self.assertEqual([e["profiling_name"] for e in entries], ["gloo:all_reduce"])

    def test_a_collective_failure_is_told_by_pytorchs_words(self):
        self.assertTrue(_flight_recorder.is_collective_failure(
            RuntimeError("[pair.cc:1] Timed out waiting 3000ms for recv operation to complete")))

        class DistBackendError(RuntimeError):
            pass

        self.assertTrue(_flight_recorder.is_collective_failure(DistBackendError("x")))
        self.assertFalse(_flight_recorder.is_collective_failure(
            RuntimeError("[pair.cc:553] Connection closed by peer [127.0.0.1]:56027")))
        self.assertFalse(_flight_recorder.is_collective_failure(ValueError("bad batch")))
        self.assertFalse(_flight_recorder.is_collective_failure(None))

    def test_without_the_variable_nothing_is_served_until_it_comes(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "fr.sock")
            self.assertFalse(_flight_recorder.serve({}))
            self.assertTrue(_flight_recorder.serve({_flight_recorder.VARIABLE: path}))
            self.assertTrue(_flight_recorder.serve({_flight_recorder.VARIABLE: path}))  # once
            self.assertEqual(ask(path, b"nonsense\n"),
                             b"error unknown request (expected fr_trace)\n")
            _flight_recorder._serving.pop(os.getpid()).close()


def entry(seq, name="gloo:all_reduce", group=("0", "default_pg"), pg_id=0, line=12):
    return {"collective_seq_id": seq, "p2p_seq_id": 0, "op_id": seq, "record_id": seq - 1,
            "pg_id": pg_id, "process_group": list(group), "profiling_name": name,
            "input_sizes": [[4]], "output_sizes": [[4]], "input_dtypes": ["Float"],
            "output_dtypes": ["Float"], "is_p2p": False, "retired": False, "state": "scheduled",
            "time_created_ns": seq, "time_discovered_started_ns": 0,
            "time_discovered_completed_ns": 0, "timeout_ms": 1800000, "thread_id": "1",
            "thread_name": "python",
            "frames": [{"name": "all_reduce", "filename": "/x/torch/distributed/c10d.py", "line": 1},
                       {"name": "<module>", "filename": "/job/train.py", "line": line}]}


def dump(last):
    return {"version": "2.10", "comm_lib_version": "", "entries": [entry(s) for s in range(1, last + 1)],
            "pg_config": {"": {"name": "", "desc": "", "ranks": "[]"}},
            "pg_status": {"0": {"last_enqueued_collective": str(last), "last_started_collective": "-1",
                                "last_completed_collective": str(last - 1)}}}


class VerdictTest(unittest.TestCase):
    def test_the_rank_that_enqueued_fewer_collectives_is_behind(self):
        lines = _flight_verdict.behind({0: dump(7), 1: dump(6), 2: dump(7)})
        self.assertEqual(lines, ["group 0 (default_pg): rank 1 behind at collective 6; ranks 0,2 "
                                 "waiting in collective 7 (gloo:all_reduce, sizes [[4]], called "
                                 "at train.py:12)"])
        self.assertEqual(_flight_verdict.behind({0: dump(7), 1: dump(7)}), [])

    def test_the_analyzer_is_run_on_the_dumps_and_its_findings_summarized(self):
        with tempfile.TemporaryDirectory() as tmp:
            for rank, last in ((0, 7), (1, 6)):
                with open(os.path.join(tmp, f"rank{rank}.json"), "w") as f:
                    json.dump(dump(last), f)
            with open(os.path.join(tmp, "rank5.json"), "w") as f:
                f.write("{not json")
            out = io.StringIO()
            with redirect_stdout(out):
                self.assertEqual(_flight_verdict.main([tmp, "2"]), 0)
            lines = out.getvalue().splitlines()
            self.assertIn("PyTorch's analyzer: collective 7 (gloo:all_reduce, group "
                          "0:default_pg, sizes [[4]]): ranks {1} did not join", lines)
            self.assertTrue(lines[0].startswith("group 0 (default_pg): rank 1 behind"))
            self.assertTrue(any(l.startswith("rank 5: unreadable dump rank5.json") for l in lines))
            with open(os.path.join(tmp, "analysis.txt")) as f:
                self.assertIn("Not all ranks joining collective, sequence number: 7", f.read())
            self.assertEqual(sorted(os.listdir(tmp)),
                             ["analysis.txt", "rank0.json", "rank1.json", "rank5.json"])

    def test_missing_ranks_are_named(self):
        with tempfile.TemporaryDirectory() as tmp:
            with open(os.path.join(tmp, "rank0.json"), "w") as f:
                json.dump(dump(3), f)
            out = io.StringIO()
            with redirect_stdout(out):
                _flight_verdict.main([tmp, "3"])
            self.assertIn("no dump from ranks 1,2 of 3", out.getvalue().splitlines())

    def test_bad_arguments_are_refused(self):
        with redirect_stdout(io.StringIO()), open(os.devnull, "w") as null:
            saved, sys.stderr = sys.stderr, null
            try:
                self.assertEqual(_flight_verdict.main(["/nowhere", "2"]), 2)
                self.assertEqual(_flight_verdict.main([tempfile.gettempdir(), "0"]), 2)
            finally:
                sys.stderr = saved

    def test_repeated_findings_are_counted_once(self):
        messages = ["We cannot decide what's wrong with this collective entry because we missed "
                    "FR dumps from ranks ({1}). If you want..."] * 3
        self.assertEqual(_flight_verdict.summarize_analyzer(messages),
                         ["We cannot decide what's wrong with this collective entry because we "
                          "missed FR dumps from ranks ({1}) (3 entries)"])


if __name__ == "__main__":
    unittest.main()
