"""torchrun's flags, read live from the installed PyTorch's parser
(torch.distributed.run.get_args_parser), against mxrun:

- every spelling of every flag, with a value torchrun accepts, is accepted by mxrun
  (`mxrun FLAG [VALUE] --print-config x.py`), or refused with a reason that names the flag: never
  as an unknown flag, which would break a launch line written for that torchrun;
- where torchrun's default is a value (not None, not empty), mxrun's is the same
  (`mxrun --print-config`'s listing).

Run with the Python of the PyTorch environment to compare with (ctest: the project's 2.13;
scripts/check-torch215.sh: 2.15):

    PYTHON tests/python/torchrun_flag_parity.py MXRUN_BIN

Prints a line per flag, then "torchrun-flag-parity: torch VERSION: ..."; exits 1 when a check
fails, 2 on bad arguments.
"""
import os
import re
import subprocess
import sys
import tempfile

# Values torchrun accepts for the flags whose default gives none (empty or None), by dest.
SAMPLES = {
    "rdzv_endpoint": "localhost:0",
    "rdzv_conf": "join_timeout=60",
    "log_dir": None,  # a fresh folder, below
    "local_ranks_filter": "0",
    "duplicate_stdout_filters": "loss",
    "duplicate_stderr_filters": "error",
    "master_port": "29501",
    "local_addr": "127.0.0.1",
    "logs_specs": "my_specs",
    "shutdown_timeout": "10",
}
# Defaults that differ on purpose, each with its reason (docs/CONTRACT.md says more).
DEFAULTS_APART = {}


def sample_value(action, folder):
    if action.nargs == 0:
        return None
    if action.choices:
        return str(list(action.choices)[0])
    if action.dest == "log_dir":
        return folder
    if action.dest in SAMPLES:
        return SAMPLES[action.dest]
    default = action.default
    if default is None or default == "" or default == []:
        return "1"  # a flag new to this torchrun: whatever it takes, mxrun must know its name
    return str(default)


def mxrun(binary, args, folder):
    script = os.path.join(folder, "x.py")
    return subprocess.run([binary, *args, "--print-config", script], cwd=folder, env={
        "PATH": os.environ.get("PATH", "/usr/bin:/bin")}, capture_output=True, text=True,
        timeout=30)


def mxrun_defaults(binary, folder):
    out = mxrun(binary, [], folder)
    if out.returncode != 0:
        raise SystemExit(f"torchrun-flag-parity: mxrun --print-config failed: {out.stderr}")
    defaults = {}
    for line in out.stdout.splitlines():
        match = re.match(r'^(\w+) = (?:"(.*)"|(true|false))\s+# ', line)
        if match:
            defaults[match.group(1)] = match.group(2) if match.group(2) is not None else match.group(3)
    return defaults


def as_text(value):
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return ",".join(value)
    return str(value)


def main():
    if len(sys.argv) != 2 or not os.access(sys.argv[1], os.X_OK):
        print("usage: PYTHON torchrun_flag_parity.py MXRUN_BIN", file=sys.stderr)
        return 2
    binary = os.path.abspath(sys.argv[1])
    import torch
    from torch.distributed.run import get_args_parser

    version = torch.__version__.split("+")[0]
    actions = [a for a in get_args_parser()._actions if a.option_strings and a.dest != "help"]
    failed = []
    accepted = refused = 0
    with tempfile.TemporaryDirectory(prefix="mxrun-flag-parity.") as folder:
        with open(os.path.join(folder, "x.py"), "w") as script:
            script.write("print('x')\n")
        for action in actions:
            value = sample_value(action, folder)
            for name in action.option_strings:
                args = [name] + ([value] if value is not None else [])
                out = mxrun(binary, args, folder)
                said = (out.stderr.strip().splitlines() or [""])[-1]
                if out.returncode == 0:
                    accepted += 1
                    print(f"ok: {' '.join(args)}: accepted")
                elif out.returncode == 2 and "unknown" not in said.lower() and (
                        action.dest in said or action.dest.replace("_", "-") in said):
                    refused += 1
                    print(f"ok: {' '.join(args)}: refused with a reason: {said}")
                else:
                    failed.append(f"{' '.join(args)}: exit {out.returncode}: {said}")
        defaults = mxrun_defaults(binary, folder)
        compared = 0
        for action in actions:
            default = action.default
            if default is None or default == "" or action.dest not in defaults:
                continue
            if action.dest in DEFAULTS_APART:
                print(f"ok: default of --{action.dest} apart: {DEFAULTS_APART[action.dest]}")
                continue
            compared += 1
            theirs, ours = as_text(default), defaults[action.dest]
            if theirs == ours:
                print(f"ok: default of --{action.dest}: {ours!r} under both")
            else:
                failed.append(f"default of --{action.dest}: torchrun {theirs!r}, mxrun {ours!r}")
    for line in failed:
        print(f"FAILED: {line}")
    print(f"torchrun-flag-parity: torch {version}: {len(actions)} flags, {accepted} spellings "
          f"accepted, {refused} refused with a reason, {compared} defaults equal"
          f"{'' if not failed else f', {len(failed)} FAILED'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
