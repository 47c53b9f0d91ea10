"""The benchmarks' plots, drawn from the samples they keep in docs/data/*.json
(scripts/bench/samples.py): every run a point, its median a bar, mxrun beside its reference.

- a distribution per case (launch.json, restart.json, recovery-*.json): <name>.svg;
- a curve against the node count (rendezvous-scale.json): rendezvous-scale.svg;
- where a benchmark kept where each recovery went (recovery-*.json's "phases"): a timeline of
  the phases' medians, one bar per launcher: <name>-timeline.svg.
"""
import glob
import json
import os
import statistics

import matplotlib.pyplot as plt

MXRUN = "#1f6fb4"
OTHERS = ["#d0671c", "#6a6a6a", "#8a4fb0", "#2a8a3a"]
PHASE_COLOURS = ["#9ecae1", "#fdae6b", "#a1d99b", "#bcbddc", "#fdd0a2", "#c7e9c0"]
# What each phase a benchmark keeps stands for (scripts/bench/recovery.py's OUTSIDE_PHASES and
# the trainer's recovery record's PHASES).
PHASE_NAMES = {
    "until_new_process": "detect, stop, re-form, spawn (launcher)",
    "until_start": "interpreter, imports, set-up (script)",
    "checkpoint": "checkpoint read",
    "first_step": "first step",
    "until_round": "detect, stop, next round",
    "join": "join the new group",
    "restore": "state from the peers",
}


def _launchers(record):
    """{launcher: colour}, mxrun's first (the first one named mxrun...: blue), then the others in
    the order the samples name them."""
    seen = []
    for case in record["cases"]:
        for launcher in case["samples"]:
            if launcher not in seen:
                seen.append(launcher)
    ordered = [l for l in seen if l.startswith("mxrun")] + [l for l in seen if not l.startswith("mxrun")]
    return {l: MXRUN if i == 0 else OTHERS[(i - 1) % len(OTHERS)] for i, l in enumerate(ordered)}


def _footer(fig, record):
    fig.text(0.01, 0.01, f"{record['date']}, {record['commit']}: {record['command']}", fontsize=7,
             color="#555555", ha="left", va="bottom")


def _log_scale_wanted(values):
    positive = [v for v in values if v > 0]
    return len(positive) > 1 and max(positive) / min(positive) > 20


def distribution(record):
    launchers = _launchers(record)
    cases = record["cases"]
    fig, ax = plt.subplots(figsize=(8, 3.6 + 0.15 * len(launchers)))
    width = 0.8 / len(launchers)
    every = []
    for ci, case in enumerate(cases):
        for li, (launcher, colour) in enumerate(launchers.items()):
            values = case["samples"].get(launcher, [])
            if not values:
                continue
            every.extend(values)
            x = ci + (li - (len(launchers) - 1) / 2) * width
            spread = [x + width * 0.3 * ((i % 5) - 2) / 2 for i in range(len(values))]
            ax.scatter(spread, values, s=14, color=colour, alpha=0.75, zorder=3,
                       label=launcher if ci == 0 else None)
            median = statistics.median(values)
            ax.hlines(median, x - width * 0.42, x + width * 0.42, color=colour, linewidth=2.2,
                      zorder=4)
            ax.annotate(_fmt(median, record["unit"]), (x, median), textcoords="offset points",
                        xytext=(0, 6), ha="center", fontsize=7.5, color=colour)
    ax.set_xticks(range(len(cases)))
    ax.set_xticklabels([c["case"] for c in cases])
    if _log_scale_wanted(every):
        ax.set_yscale("log")
    ax.set_ylabel(f"{record['unit']}" + (" (log scale)" if ax.get_yscale() == "log" else ""))
    ax.set_title(_title(record), fontsize=10)
    ax.grid(axis="y", color="#dddddd", linewidth=0.6)
    ax.set_axisbelow(True)
    ax.legend(fontsize=8, frameon=False, loc="best")
    fig.subplots_adjust(bottom=0.2, left=0.1, right=0.98, top=0.88)
    _footer(fig, record)
    return fig


def scaling(record):
    fig, ax = plt.subplots(figsize=(8, 4))
    for launcher, colour in _launchers(record).items():
        xs, medians = [], []
        for case in record["cases"]:
            values = case["samples"].get(launcher, [])
            ax.scatter([case["x"]] * len(values), values, s=12, color=colour, alpha=0.6, zorder=3)
            if values:
                xs.append(case["x"])
                medians.append(statistics.median(values))
        ax.plot(xs, medians, marker="o", color=colour, label=f"{launcher} (median)", zorder=4)
        for x, m in zip(xs, medians):
            ax.annotate(_fmt(m, record["unit"]), (x, m), textcoords="offset points", xytext=(6, -2),
                        fontsize=7.5, color=colour)
    ax.set_xscale("log", base=2)
    ax.set_xticks([c["x"] for c in record["cases"]])
    ax.set_xticklabels([str(c["x"]) for c in record["cases"]])
    ax.set_yscale("log")
    ax.set_xlabel("nodes (agent processes on one machine)")
    ax.set_ylabel(f"{record['unit']} (log scale)")
    ax.set_title(_title(record), fontsize=10)
    ax.grid(color="#dddddd", linewidth=0.6)
    ax.set_axisbelow(True)
    ax.legend(fontsize=8, frameon=False)
    fig.subplots_adjust(bottom=0.2, left=0.1, right=0.98, top=0.88)
    _footer(fig, record)
    return fig


def timeline(record):
    """The phases' medians laid end to end, a bar per launcher: where a recovery's time goes."""
    order = record["phases"]["order"]
    runs = record["phases"]["runs"]
    launchers = list(runs)
    fig, ax = plt.subplots(figsize=(9, 2.3 + 0.55 * len(launchers)))
    for row, launcher in enumerate(launchers):
        start = 0.0
        for pi, phase in enumerate(order):
            values = [r[phase] for r in runs[launcher] if phase in r]
            if not values:
                continue
            length = statistics.median(values)
            ax.barh(row, length, left=start, height=0.5, color=PHASE_COLOURS[pi % len(PHASE_COLOURS)],
                    edgecolor="white", label=PHASE_NAMES.get(phase, phase.replace("_", " ")) if row == 0 else None)
            if length > 0.08 * _longest(runs, order):
                ax.text(start + length / 2, row, f"{length:.2f} s", ha="center", va="center",
                        fontsize=7.5)
            start += length
        ax.text(start, row, f"  {start:.2f} s", ha="left", va="center", fontsize=8, fontweight="bold")
    ax.set_yticks(range(len(launchers)))
    ax.set_yticklabels([f"{l} ({len(runs[l])} runs)" for l in launchers], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("seconds from the SIGKILL (medians of each phase)")
    ax.set_xlim(0, _longest(runs, order) * 1.18)
    ax.set_title("Where a recovery's time goes: " + _title(record), fontsize=10)
    ax.legend(fontsize=7.5, frameon=False, ncol=min(len(order), 2), loc="upper left",
              bbox_to_anchor=(0.0, -0.3))
    fig.subplots_adjust(left=0.3, right=0.97, top=0.88, bottom=0.42)
    _footer(fig, record)
    return fig


def _longest(runs, order):
    return max(sum(statistics.median([r[p] for r in rs if p in r]) for p in order
                   if any(p in r for r in rs)) for rs in runs.values())


def _title(record):
    titles = {
        "launch": "Launch to exit, one to four workers that exit at once",
        "restart": "Restart: one worker SIGKILLed to every replacement running",
        "rendezvous-scale": "Round formation: launch to the last worker started",
        "recovery-unmodified": "An unmodified DDP script, a rank SIGKILLed to the next step",
        "recovery-elastic": "A DDP script under mxrun.run, a rank SIGKILLed to the next step",
        "recovery-trainer": "The bundled trainer, a rank SIGKILLed to the next step",
    }
    return titles.get(record["benchmark"], record["benchmark"])


def _fmt(value, unit):
    if unit == "ms":
        return f"{value:.1f} ms" if value < 100 else f"{value / 1000:.2f} s"
    return f"{value * 1000:.0f} ms" if value < 1 else f"{value:.2f} s"


def figures(data_dir):
    """(file name, figure) for every record in data_dir, in name order."""
    result = []
    for path in sorted(glob.glob(os.path.join(data_dir, "*.json"))):
        with open(path, encoding="utf-8") as f:
            record = json.load(f)
        name = os.path.splitext(os.path.basename(path))[0]
        if record["benchmark"] == "rendezvous-scale":
            result.append((f"{name}.svg", scaling(record)))
        else:
            result.append((f"{name}.svg", distribution(record)))
        if record.get("phases"):
            result.append((f"{name}-timeline.svg", timeline(record)))
    return result
