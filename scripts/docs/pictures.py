#!/usr/bin/env python3
"""Draws the documents' pictures as SVG (issue 59, item 4), in the docs environment (matplotlib,
scripts/python-env.sh docs):

  pictures.py OUT_DIR      draws every picture into OUT_DIR (docs/images to refresh them)

- architecture.svg: what talks to what over which channel (architecture_picture.py);
- the benchmarks' plots and the recovery timeline, from the samples the benchmark scripts keep in
  docs/data/*.json (benchmark_plots.py; scripts/bench/samples.py writes them, then runs this).

The SVGs are deterministic (no date, fixed ids, text kept as text), so `scripts/build-docs.sh
--check` draws them again from the same data and requires the committed ones to be equal: a
picture never drifts from its data or its code.
"""
import os
import sys

import matplotlib

matplotlib.use("svg")
import matplotlib.pyplot as plt  # noqa: E402 (after the back end is chosen)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import architecture_picture  # noqa: E402
import benchmark_plots  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DATA_DIR = os.path.join(REPO, "docs", "data")

plt.rcParams.update({
    "svg.hashsalt": "mxrun",   # the same ids in every drawing
    "svg.fonttype": "none",    # text stays text: smaller, searchable, no font's outlines
    "font.family": "DejaVu Sans",
    "font.size": 9,
})


def save(fig, path):
    fig.savefig(path, format="svg", metadata={"Date": None, "Creator": None})
    plt.close(fig)


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: pictures.py OUT_DIR")
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    drawn = []
    fig = plt.figure(figsize=(12, 7.8))
    architecture_picture.draw(fig)
    save(fig, os.path.join(out, "architecture.svg"))
    drawn.append("architecture.svg")
    for name, fig in benchmark_plots.figures(DATA_DIR):
        save(fig, os.path.join(out, name))
        drawn.append(name)
    print(f"pictures: {len(drawn)} drawn into {out}: {', '.join(drawn)}")


if __name__ == "__main__":
    main()
