"""Tests of --prestart's interpreter (python/mxrun/_prestart.py): what it may let a round change,
and the guards behind that. A traced import of its PRE_IMPORTS (torch, torch.distributed,
torch._dynamo) reads none of the variables a round notice sets (every getenv of the process,
through an LD_PRELOAD shim built here with the C compiler, and every os.environ read). If a
PyTorch upgrade starts reading one at import, this fails, and ROUND_ONLY must lose it (the
interpreter then starts afresh for that change). At run time, a module named in
MXRUN_PRESTART_IMPORTS that reads one by name is caught (_env_reads)."""
import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

from mxrun import _env_reads, _prestart

ORIGINAL_READ = os._Environ.__getitem__
HERE = os.path.dirname(os.path.abspath(__file__))
PYTHON_DIR = os.path.join(os.path.dirname(os.path.dirname(HERE)), "python")


# Modules that walk the whole environment during `import torch, torch.distributed`, and why
# that reads no round variable. tqdm (imported through torch when Lightning or Transformers
# brought it into the venv) keeps only TQDM_* values for its defaults (tqdm/utils.py envwrap).
SCANS_JUDGED = {"tqdm.utils": "keeps only TQDM_* (tqdm 4.70 envwrap)"}


class StaleAfterTest(unittest.TestCase):
    def test_the_contract_and_mxrun_variables_may_change(self):
        before = {"OMP_NUM_THREADS": "1", "PATH": "/bin", "MXRUN_STANDBY": "1"}
        after = {"OMP_NUM_THREADS": "1", "PATH": "/bin", "RANK": "3", "MASTER_PORT": "29500",
                 "TORCHELASTIC_RESTART_COUNT": "1", "MXRUN_ROUND": "2",
                 "CUDA_VISIBLE_DEVICES": "3"}
        self.assertEqual(_prestart.stale_after(before, after), [])

    def test_anything_else_that_changes_is_named(self):
        before = {"OMP_NUM_THREADS": "1", "PATH": "/bin"}
        after = {"OMP_NUM_THREADS": "4", "PATH": "/bin", "RANK": "0", "TORCH_LOGS": "+dynamo"}
        self.assertEqual(_prestart.stale_after(before, after), ["OMP_NUM_THREADS", "TORCH_LOGS"])


class ImportTraceTest(unittest.TestCase):
    def test_import_torch_reads_no_variable_a_round_sets(self):
        cc = shutil.which("cc") or shutil.which("gcc")
        self.assertIsNotNone(cc, "a C compiler is needed to build the getenv shim")
        with tempfile.TemporaryDirectory() as tmp:
            shim = os.path.join(tmp, "getenv_trace.so")
            subprocess.run([cc, "-shared", "-fPIC", "-O1", "-o", shim,
                            os.path.join(HERE, "getenv_trace.c"), "-ldl"], check=True)
            trace = os.path.join(tmp, "getenv.txt")
            # A read by name is recorded as the name; a walk over the whole environment (an
            # items() or values() loop, which reads every value) as "scan:" and the module
            # that walked it, so that the test can tell which modules scan and judge them.
            code = ("import os, sys\n"
                    "seen = set()\n"
                    "get = os._Environ.__getitem__\n"
                    "def traced(self, key):\n"
                    "    caller = sys._getframe(1)\n"
                    "    if caller.f_code.co_name == '__iter__':  # ItemsView, ValuesView\n"
                    "        walker = caller.f_back\n"
                    "        while walker and walker.f_code.co_filename.startswith('<'):\n"
                    "            walker = walker.f_back\n"
                    "        seen.add('scan:' + (walker.f_globals.get('__name__', '?')\n"
                    "                            if walker else '?'))\n"
                    "    else:\n"
                    "        seen.add(key)\n"
                    "    return get(self, key)\n"
                    "os._Environ.__getitem__ = traced\n"
                    f"import {', '.join(_prestart.PRE_IMPORTS)}\n"
                    "os._Environ.__getitem__ = get\n"
                    "print('\\n'.join(sorted(seen)))\n")
            env = dict(os.environ, LD_PRELOAD=shim, GETENV_TRACE_FILE=trace)
            r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                               text=True, timeout=300)
            self.assertEqual(r.returncode, 0, r.stderr)
            with open(trace) as f:
                from_c = {line.strip() for line in f if line.strip()}
            from_python = {line.strip() for line in r.stdout.splitlines() if line.strip()}
        # The trace works: it saw what the OpenMP runtime and PyTorch are known to read.
        self.assertIn("OMP_NUM_THREADS", from_c)
        self.assertTrue(from_python)
        read = sorted(n for n in from_c | from_python if _prestart.round_only(n))
        self.assertEqual(read, [], "read at import, yet a round notice may change them")
        scanners = sorted(n[len("scan:"):] for n in from_python if n.startswith("scan:"))
        unjudged = [m for m in scanners if m not in SCANS_JUDGED]
        self.assertEqual(unjudged, [], "these modules walk the whole environment at import: "
                         "read what they keep, and add them to SCANS_JUDGED with the reason")


@contextlib.contextmanager
def importable(modules):
    """Modules {name: source} written to a scratch folder first on sys.path; gone afterwards,
    from sys.path and sys.modules."""
    with tempfile.TemporaryDirectory() as tmp:
        for name, source in modules.items():
            with open(os.path.join(tmp, name + ".py"), "w") as f:
                f.write(source)
        sys.path.insert(0, tmp)
        try:
            yield
        finally:
            sys.path.remove(tmp)
            for name in modules:
                sys.modules.pop(name, None)


class EnvReadsTest(unittest.TestCase):
    """The run-time guard, on modules written here: what they read by name is named with the
    module that read it; a walk over the whole environment is not a read by name."""

    def test_reads_by_name_are_named_with_their_module(self):
        reads = set()
        with importable({"reads_rank_at_import": "import os\n"
                         "rank = int(os.environ.get('RANK', '0'))\n"
                         "threads = os.getenv('OMP_NUM_THREADS')\n"
                         "slurm = 'SLURM_PROCID' in os.environ\n"
                         "walked = [v for _, v in os.environ.items()]\n"}):
            with _env_reads.watched(reads):
                __import__("reads_rank_at_import")
        self.assertIn(("RANK", "reads_rank_at_import"), reads)
        self.assertIn(("OMP_NUM_THREADS", "reads_rank_at_import"), reads)
        self.assertIn(("SLURM_PROCID", "reads_rank_at_import"), reads)
        walked = {key for key, _ in reads} - {"RANK", "OMP_NUM_THREADS", "SLURM_PROCID"}
        self.assertEqual(walked, set(), "a walk over every variable counted as reads by name")
        self.assertIs(os._Environ.__getitem__, ORIGINAL_READ, "os.environ left traced")

    def test_import_ahead_names_a_module_that_reads_a_round_variable(self):
        with importable({"keeps_local_rank": "import os\nLOCAL = os.environ.get('LOCAL_RANK')\n",
                         "keeps_threads": "import os\nTHREADS = os.environ.get('OMP_NUM_THREADS')\n"}):
            self.assertEqual(_prestart.import_ahead(["keeps_threads"]), [])
            self.assertEqual(_prestart.import_ahead(["keeps_local_rank"]),
                             ["LOCAL_RANK (by keeps_local_rank)"])
            with self.assertRaises(ImportError):  # a module the user named must exist
                _prestart.import_ahead(["no_such_module_here"])


class WithoutMxrunTest(unittest.TestCase):
    def test_it_runs_the_script_at_once_as_python_would(self):
        with tempfile.TemporaryDirectory() as tmp:
            script = os.path.join(tmp, "show.py")
            with open(script, "w") as f:
                f.write("import sys\nprint(__name__, sys.argv[1:], sys.path[0])\n"
                        "sys.exit(3)\n")
            env = {k: v for k, v in os.environ.items() if not k.startswith("MXRUN_")}
            env["PYTHONPATH"] = PYTHON_DIR
            r = subprocess.run([sys.executable, "-m", "mxrun._prestart", script, "a", "b"],
                               env=env, capture_output=True, text=True, timeout=60)
            self.assertEqual(r.returncode, 3, r.stderr)  # the script's own exit code
            self.assertEqual(r.stdout.strip(), f"__main__ ['a', 'b'] {tmp}")


if __name__ == "__main__":
    unittest.main()
