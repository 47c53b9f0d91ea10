#!/usr/bin/env python3
"""Diffs what the workers of two launchers saw (the dumps of scripts/gpu/ddp_nccl_amp.py):

  env_diff.py DUMP_DIR TAG_A TAG_B

Rank by rank: variables only one side set, variables set differently, and the CPU affinity and
visible devices. Values that are per-run by nature (ports, run ids, temporary files) are listed
apart as "per-run". Markdown on stdout; exit 0 when both sides had the same ranks, 1 when not.
"""
import json
import os
import sys

PER_RUN = {"MASTER_PORT", "TORCHELASTIC_RUN_ID", "TORCHELASTIC_ERROR_FILE",
           "TORCHELASTIC_TIMER_FILE", "TORCH_NCCL_ASYNC_ERROR_HANDLING_FILE"}


def load(dump_dir, tag):
    ranks = {}
    for name in sorted(os.listdir(dump_dir)):
        if name.startswith(tag + "_rank") and name.endswith(".json"):
            with open(os.path.join(dump_dir, name)) as f:
                doc = json.load(f)
            ranks[int(doc["env"]["RANK"])] = doc
    return ranks


def main():
    dump_dir, a_tag, b_tag = sys.argv[1:4]
    a, b = load(dump_dir, a_tag), load(dump_dir, b_tag)
    print(f"### Worker environment: {a_tag} against {b_tag}\n")
    if sorted(a) != sorted(b) or not a:
        print(f"- ranks differ: {a_tag} {sorted(a)}, {b_tag} {sorted(b)}")
        return 1
    for rank in sorted(a):
        ea, eb = a[rank]["env"], b[rank]["env"]
        print(f"#### rank {rank}\n")
        print(f"- CPUs: {a_tag} {len(a[rank]['cpus'])} {compact(a[rank]['cpus'])}; "
              f"{b_tag} {len(b[rank]['cpus'])} {compact(b[rank]['cpus'])}")
        for key in ("CUDA_VISIBLE_DEVICES", "LOCAL_RANK", "device", "device_name", "check_sum",
                    "torch", "nccl"):
            # Upper case: a variable of the environment; else a fact the worker recorded.
            va, vb = (ea.get(key), eb.get(key)) if key.isupper() else (a[rank].get(key),
                                                                         b[rank].get(key))
            if va is not None or vb is not None:
                print(f"- {key}: {a_tag} `{va}`; {b_tag} `{vb}`")
        only_a = sorted(set(ea) - set(eb))
        only_b = sorted(set(eb) - set(ea))
        changed = sorted(k for k in set(ea) & set(eb) if ea[k] != eb[k] and k not in PER_RUN)
        per_run = sorted(k for k in set(ea) & set(eb) if ea[k] != eb[k] and k in PER_RUN)
        print(f"- set by {a_tag} only: " + (", ".join(f"`{k}={ea[k]}`" for k in only_a) or "none"))
        print(f"- set by {b_tag} only: " + (", ".join(f"`{k}={eb[k]}`" for k in only_b) or "none"))
        print("- set differently: " + (", ".join(f"`{k}`: `{ea[k]}` / `{eb[k]}`" for k in changed)
                                        or "none"))
        print("- per-run values (differ by nature): " + (", ".join(per_run) or "none") + "\n")
    return 0


def compact(cpus):
    """0-3,8-11 style."""
    out, start, prev = [], None, None
    for c in cpus + [None]:
        if start is None:
            start = prev = c
        elif c is not None and c == prev + 1:
            prev = c
        else:
            out.append(f"{start}-{prev}" if start != prev else f"{start}")
            start = prev = c
    return ",".join(out)


if __name__ == "__main__":
    sys.exit(main())
