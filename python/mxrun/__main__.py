"""`python -m mxrun ...` runs the mxrun launcher, as `python -m torch.distributed.run` runs
torchrun: the `mxrun` program installed beside this Python (a virtual environment's bin/, where
the wheel puts it), else the first on PATH."""
import os
import shutil
import sys


def find_launcher():
    beside = os.path.join(os.path.dirname(sys.executable), "mxrun")
    if os.path.isfile(beside) and os.access(beside, os.X_OK):
        return beside
    return shutil.which("mxrun")


def main():
    launcher = find_launcher()
    if launcher is None:
        print("python -m mxrun: the mxrun program is neither beside this Python "
              f"({os.path.dirname(sys.executable)}) nor on PATH: install mxrun "
              "(pip install mxrun, or scripts/install.sh from a checkout)", file=sys.stderr)
        return 2
    # The workers' Python is this one, as under `python -m torch.distributed.run`.
    env = dict(os.environ)
    env.setdefault("PYTHON_EXEC", sys.executable)
    os.execve(launcher, [launcher, *sys.argv[1:]], env)
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(main())
