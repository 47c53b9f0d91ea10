"""What the GPU steps that run an example script under mxrun and torchrun share
(scripts/gpu/python_nccl.py, scripts/gpu/fsdp2_nccl.py): the settings from the environment, the
number of workers, one launch with its JSON records, and the median step.

Environment: PY (the Python with PyTorch), MXRUN, TORCHRUN, ROOT (the checkout), NPROC (default:
the GPUs torch sees), DEVICE (default cuda; cpu runs the same on 2 CPU ranks with Gloo), TIMEOUT
(seconds per run, default 150).
"""
import json
import os
import re
import statistics
import subprocess
import sys

ROOT = os.environ.get("ROOT") or os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
PY = os.environ.get("PY", sys.executable)
MXRUN = os.environ.get("MXRUN", os.path.join(ROOT, "build/bin/mxrun"))
TORCHRUN = os.environ.get("TORCHRUN", os.path.join(os.path.dirname(PY), "torchrun"))
DEVICE = os.environ.get("DEVICE", "cuda")
TIMEOUT = float(os.environ.get("TIMEOUT", "150"))
RECORD = re.compile(r"(\{\"event\": .*\})\s*$")  # the examples' one JSON record per line


def nproc():
    """NPROC, else 2 on the CPU, else the GPUs torch sees (0: none)."""
    if os.environ.get("NPROC"):
        return int(os.environ["NPROC"])
    if DEVICE == "cpu":
        return 2
    out = subprocess.run([PY, "-c", "import torch; print(torch.cuda.device_count())"],
                         capture_output=True, text=True, timeout=120).stdout.strip()
    return int(out or 0)


def launch(launcher, n, script_args):
    """Runs `launcher --standalone --nproc_per_node=n --max_restarts=1 script_args...` ("mxrun"
    or "torchrun"), its own session, within TIMEOUT; returns (exit code or "timed out", the
    records, stderr)."""
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"), PYTHON_EXEC=PY,
               TORCH_DISABLE_SHARE_RDZV_TCP_STORE="1")  # torchrun's restarts need it (2.13)
    program = MXRUN if launcher == "mxrun" else TORCHRUN
    argv = [program, "--standalone", f"--nproc_per_node={n}", "--max_restarts=1", *script_args]
    try:
        r = subprocess.run(argv, capture_output=True, text=True, timeout=TIMEOUT, env=env,
                           start_new_session=True)
        rc, out, err = r.returncode, r.stdout, r.stderr
    except subprocess.TimeoutExpired as e:
        rc, out, err = "timed out", (e.stdout or b"").decode(), (e.stderr or b"").decode()
    records = []
    for line in out.splitlines():
        m = RECORD.search(line)
        if m:
            try:
                records.append(json.loads(m.group(1)))
            except ValueError:
                pass
    return rc, records, err


def median_step(records):
    """The median time between consecutive step records, None with fewer than two."""
    times = [r["time"] for r in records if r["event"] == "step"]
    gaps = [b - a for a, b in zip(times, times[1:])]
    return statistics.median(gaps) if gaps else None


def stderr_tail(err, lines):
    return "  stderr tail: " + " / ".join(err.strip().splitlines()[-lines:])
