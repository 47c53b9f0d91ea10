"""The architecture as a picture (issue 59, item 4): the master, two nodes' agents and workers,
etcd, the workers' store and the observers, and what talks to what over which channel. Drawn
with matplotlib by scripts/docs/pictures.py; the facts are docs/ARCHITECTURE.md's and
docs/architecture/*.md's, so change this with them.
"""
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch

# Colours by role: control plane, the agent's own processes, the workers, outside observers.
CONTROL = "#dbe9f6"
AGENT = "#fde9c9"
WORKER = "#dff2df"
OUTSIDE = "#eeeeee"
EDGE = "#444444"
STORE = "#2a7a2a"  # what PyTorch's own code sends


def _box(ax, x, y, w, h, title, lines=(), colour=OUTSIDE, dashed=False, size=10):
    ax.add_patch(FancyBboxPatch((x, y), w, h, boxstyle="round,pad=0.02,rounding_size=0.12",
                                facecolor=colour, edgecolor=EDGE, linewidth=1.2,
                                linestyle="--" if dashed else "-"))
    ax.text(x + w / 2, y + h - 0.22, title, ha="center", va="top", fontsize=size,
            fontweight="bold")
    for i, line in enumerate(lines):
        ax.text(x + w / 2, y + h - 0.55 - 0.27 * i, line, ha="center", va="top", fontsize=8)


def _arrow(ax, start, end, label, both=False, offset=(0, 0), colour=EDGE, style="-", rad=0.0,
           align="center"):
    ax.add_patch(FancyArrowPatch(start, end, arrowstyle="<|-|>" if both else "-|>",
                                 mutation_scale=12, color=colour, linewidth=1.2, linestyle=style,
                                 connectionstyle=f"arc3,rad={rad}", shrinkA=2, shrinkB=2))
    mx, my = (start[0] + end[0]) / 2 + offset[0], (start[1] + end[1]) / 2 + offset[1]
    ax.text(mx, my, label, ha=align, va="center", fontsize=7.5, color="#222222",
            bbox={"boxstyle": "round,pad=0.15", "facecolor": "white", "edgecolor": "none",
                  "alpha": 0.9})


def draw(fig):
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_xlim(0, 16)
    ax.set_ylim(-0.35, 10.4)
    ax.axis("off")

    # Top: etcd (optional), the master, the observers.
    _box(ax, 0.3, 8.3, 3.2, 1.7, "etcd (optional)", ["3 members: the master elected,",
                                                     "its state fenced (--rdzv_backend=etcd)"],
         CONTROL, dashed=True)
    _box(ax, 6.0, 8.3, 4.0, 1.7, "rendezvous master", ["mxrun-master on a head node, or in",
                                                       "node 0's agent (c10d); a pure state",
                                                       "machine: rounds, ranks, failures"],
         CONTROL)
    _box(ax, 12.4, 8.3, 3.3, 1.7, "observers", ["Prometheus, a browser (status page),",
                                                "mxrun status, systemd, Slurm"], OUTSIDE)
    _arrow(ax, (3.5, 9.15), (6.0, 9.15), "etcd v3 gRPC:\nelection, fenced writes", both=True,
           style="--")
    _arrow(ax, (12.4, 9.15), (10.0, 9.15), "gRPC (mxrun status),\nHTTP(S) /metrics, /", offset=(0, 0))

    # Two nodes, each an agent with its guardian and workers.
    for n, x0 in enumerate((0.3, 8.2)):
        ax.add_patch(FancyBboxPatch((x0, 0.3), 7.5, 6.6, boxstyle="round,pad=0.02,rounding_size=0.2",
                                    facecolor="white", edgecolor="#999999", linewidth=1.0))
        ax.text(x0 + 0.2, 6.75, f"node {n}", ha="left", va="top", fontsize=10, color="#666666")
        _box(ax, x0 + 1.6, 3.9, 4.3, 2.35, "mxrun agent", ["one thread, one epoll loop: spawn,",
                                                          "watch, stop, restart; progress, hangs,",
                                                          "health; metrics and status page"],
             AGENT)
        _box(ax, x0 + 0.25, 4.55, 1.15, 1.3, "guardian", ["kills the", "workers if", "mxrun dies"],
             AGENT, size=8)
        ranks = (0, 1) if n == 0 else (2, 3)
        for i, r in enumerate(ranks):
            _box(ax, x0 + 0.5 + 3.6 * i, 0.6, 2.9, 1.6, f"worker, rank {r}",
                 ["your script or train:", "its own session; torchrun's env"], WORKER)
            wx = x0 + 1.95 + 3.6 * i
            _arrow(ax, (wx - 0.35, 3.9), (wx - 0.35, 2.2), "fork, exec;\nSIGTERM, SIGKILL",
                   offset=(-0.05, 0.3))
            _arrow(ax, (wx + 0.45, 2.2), (wx + 0.45, 3.9), "fd 3: steps,\nround notices",
                   both=True, offset=(0.1, -0.3))
        # The agent's link to the master.
        _arrow(ax, (x0 + 3.75, 6.25), (8.0 + (-0.9 if n == 0 else 0.9), 8.3),
               "gRPC stream: join, heartbeats,\nrounds, failures (token, mTLS)", both=True,
               offset=(-1.4 if n == 0 else 1.4, 0.1))
    # The workers' store: a thread of node 0's agent; every worker's PyTorch reaches it over TCP.
    _box(ax, 3.05, 4.0, 2.2, 0.95, "workers' store", ["TCPStore protocol"], "#f7d9a8", size=8.5)
    _arrow(ax, (3.2, 2.2), (3.7, 4.0), "", colour=STORE)
    _arrow(ax, (4.6, 2.2), (4.4, 4.0), "TCPStore\n(TCP)", colour=STORE, offset=(0.05, -0.25))
    _arrow(ax, (9.0, 2.2), (5.25, 4.35), "", colour=STORE)
    # The collectives, between every pair of ranks on both nodes.
    _arrow(ax, (7.3, 1.2), (8.7, 1.2), "", both=True, colour=STORE)
    ax.text(8.0, 0.0, "NCCL on GPUs, Gloo on CPU: the collectives (all-reduce, broadcast) between "
            "the workers of every node; the store and the collectives are PyTorch's own, the rest "
            "is mxrun", ha="center", va="center", fontsize=8, color="#222222")
