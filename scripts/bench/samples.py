"""Every sample a benchmark measured, kept for the documents' plots (issue 59, item 4).

A benchmark calls keep(name, cases, command) at its end: docs/data/<name>.json then holds each
case's samples per launcher (the medians in docs/BENCHMARKS.md are these samples' medians), with
the date, the commit and the command, and scripts/docs/pictures.py draws docs/images/ from them
when the docs environment (.venv-docs, matplotlib) is there; otherwise it says how to draw them.
SAMPLES_DIR (default <repo>/docs/data) sends the file elsewhere, and SAMPLES_DIR=off keeps none:
a run for a quick look need not touch the documents' data.
"""
import json
import os
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _commit():
    r = subprocess.run(["git", "-C", REPO, "rev-parse", "--short=7", "HEAD"], capture_output=True,
                       text=True, timeout=30)
    return r.stdout.strip() or "unknown"


def keep(name, cases, command, unit, notes="", phases=None):
    """cases: [{"case": label, "x": number or None, "samples": {launcher: [values]}}], in the
    order the plot shows them; None values (a run that timed out) are dropped. phases: where
    each launcher's recoveries went, {"order": [phase, ...], "runs": {launcher: [{phase:
    seconds}]}}, for the recovery timeline."""
    where = os.environ.get("SAMPLES_DIR", os.path.join(REPO, "docs", "data"))
    if where == "off":
        return
    os.makedirs(where, exist_ok=True)
    record = {
        "benchmark": name,
        "date": time.strftime("%Y-%m-%d", time.gmtime()),
        "commit": _commit(),
        "command": command,
        "unit": unit,
        "notes": notes,
        "cases": [{"case": c["case"], "x": c.get("x"),
                   "samples": {k: [round(v, 6) for v in vs if v is not None]
                               for k, vs in c["samples"].items()}} for c in cases],
    }
    if phases:
        record["phases"] = {"order": list(phases["order"]),
                            "runs": {k: [{p: round(v, 6) for p, v in run.items() if v is not None}
                                         for run in runs]
                                     for k, runs in phases["runs"].items()}}
    path = os.path.join(where, f"{name}.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(record, f, indent=1, sort_keys=True)
        f.write("\n")
    print(f"{name}: the samples kept in {os.path.relpath(path, REPO)}", file=sys.stderr)
    if where != os.path.join(REPO, "docs", "data"):
        return  # not the documents' data: their pictures stay as they are
    python = os.path.join(REPO, ".venv-docs", "bin", "python3")
    pictures = os.path.join(REPO, "scripts", "docs", "pictures.py")
    if os.access(python, os.X_OK):
        r = subprocess.run([python, pictures, os.path.join(REPO, "docs", "images")],
                           capture_output=True, text=True, timeout=300)
        print(f"{name}: {(r.stdout + r.stderr).strip()}", file=sys.stderr)
    else:
        print(f"{name}: to draw the plots: scripts/python-env.sh docs && .venv-docs/bin/python3 "
              "scripts/docs/pictures.py docs/images", file=sys.stderr)
