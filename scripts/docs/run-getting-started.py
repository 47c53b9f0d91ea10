#!/usr/bin/env python3
"""Runs every command of the getting-started page as written, in order (issue 59, item 5).

  run-getting-started.py PAGE VENV WHEEL_DIR

Each ```sh block of PAGE runs in one `bash -euo pipefail`, all in one scratch folder (so the
files one block writes are there for the next), with VENV's bin/ first on PATH (the environment
the page's reader has activated) and `dist/` in the scratch folder pointing at WHEEL_DIR (the
page's `pip install dist/mxrun-*.whl`). A ```text block that follows a ```sh block is output that
block must print: each of its lines, in order, must be found in a line of what the block printed
(stdout and stderr together), every number in it standing for any number. The one change made to
the commands: the page's rendezvous port 29400 becomes a port the kernel gives, so the test never
takes a fixed port.

Prints "ok: ..." or "bad: ..." per block (scripts/check-wheel.sh counts them); exits 1 if any
block failed. One failure is PyTorch's own, not the page's: a Gloo rank that aborts at exit
("terminate called without an active exception"), under torchrun as under mxrun, a few runs in a
hundred even after the barrier the page's script has (the page says so). A block that fails
while a worker printed that line is run once more, and the ok line says so; a second failure is
a failure. Each block is bounded (240 s) and runs in a session of its own, which is killed
when the block ends, so nothing it started outlives it. Standard library only.
"""
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile

BLOCK_SECONDS = 240
PYTORCH_EXIT_ABORT = "terminate called without an active exception"
PAGE_PORT = "29400"
FENCE = re.compile(r"^```(\w*)\s*$")


def blocks(page_text):
    """[(command, expected lines or [])] in the page's order."""
    result = []
    kind, lines, last_kind = None, [], None
    for line in page_text.split("\n"):
        m = FENCE.match(line)
        if m and kind is None:
            kind, lines = m.group(1), []
            continue
        if line.strip() == "```" and kind is not None:
            if kind == "sh":
                result.append(["\n".join(lines), []])
            elif kind == "text" and last_kind == "sh":
                result[-1][1] = [l for l in lines if l.strip() and l.strip() != "..."]
            last_kind, kind = kind, None
            continue
        if kind is not None:
            lines.append(line)
    if kind is not None:
        sys.exit(f"run-getting-started: a ```{kind} block is never closed")
    return result


def pattern(expected_line):
    """The line as a regular expression in which every number stands for any number."""
    escaped = re.escape(expected_line.strip())
    return re.compile(re.sub(r"\d+(?:\\\.\d+)*", r"\\d+(?:\\.\\d+)*", escaped))


def missing_lines(expected, output):
    """The first expected line not found, in order, in the output; None when all are."""
    out_lines = output.split("\n")
    at = 0
    for want in expected:
        p = pattern(want)
        while at < len(out_lines) and not p.search(out_lines[at]):
            at += 1
        if at == len(out_lines):
            return want
        at += 1
    return None


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return str(s.getsockname()[1])


def run_block(command, expected, scratch, env):
    """(None when the block ran and printed what the page shows, else what went wrong; whether a
    worker printed PyTorch's abort at exit)."""
    run = command.replace(PAGE_PORT, free_port())
    proc = subprocess.Popen(["bash", "-euo", "pipefail", "-c", run], cwd=scratch, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    try:
        output, _ = proc.communicate(timeout=BLOCK_SECONDS)
        timed_out = False
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        output, _ = proc.communicate()
        timed_out = True
    try:  # whatever the block left behind (a background job), it ends with the block
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    tail = " | ".join(output.strip().split("\n")[-6:])
    aborted = PYTORCH_EXIT_ABORT in output
    said = f" (a worker said {PYTORCH_EXIT_ABORT!r})" if aborted else ""
    if timed_out:
        return f"ran over {BLOCK_SECONDS} s{said}: {tail}", aborted
    if proc.returncode != 0:
        return f"exited {proc.returncode}{said}: {tail}", aborted
    absent = missing_lines(expected, output)
    if absent is not None:
        return f"did not print {absent!r}{said}: {tail}", aborted
    return None, aborted


def main():
    if len(sys.argv) != 4:
        sys.exit("usage: run-getting-started.py PAGE VENV WHEEL_DIR")
    page, venv, wheel_dir = sys.argv[1:]
    with open(page, encoding="utf-8") as f:
        todo = blocks(f.read())
    if not todo:
        sys.exit(f"run-getting-started: {page} has no ```sh block")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    env["PATH"] = os.path.join(os.path.abspath(venv), "bin") + ":/usr/bin:/bin"
    env["VIRTUAL_ENV"] = os.path.abspath(venv)
    scratch = tempfile.mkdtemp(prefix="mxrun-getting-started.")
    failed = 0
    try:
        os.symlink(os.path.abspath(wheel_dir), os.path.join(scratch, "dist"))
        for n, (command, expected) in enumerate(todo, 1):
            first = command.strip().split("\n")[0][:70]
            verdict, aborted = run_block(command, expected, scratch, env)
            again = ""
            if verdict and aborted:
                again = f" on a second run (the first: PyTorch's abort at exit, {PYTORCH_EXIT_ABORT!r})"
                verdict, _ = run_block(command, expected, scratch, env)
            if verdict:
                print(f"bad: getting-started block {n} ({first}) {verdict}")
                failed += 1
            else:
                shown = f", and printed the {len(expected)} lines the page shows" if expected else ""
                print(f"ok: getting-started block {n} ({first}) ran as written{shown}{again}")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
