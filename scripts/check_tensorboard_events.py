#!/usr/bin/env python3
"""Reads the trainer's TensorBoard event files with TensorBoard's own reader and checks them
against its --metrics_file: every step record's loss, accuracy, learning rate and images/s must be
there as scalars, at its step, with its wall time. Needs the `tensorboard` Python package (the GPU
machine has it; Debian 12 does not package it), so it is not part of scripts/test.sh.

  python3 scripts/check_tensorboard_events.py TB_DIR METRICS_JSONL

Exit 0 when everything matches, 1 with the differences otherwise.
"""
import json
import sys

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    tb_dir, metrics = sys.argv[1], sys.argv[2]
    acc = EventAccumulator(tb_dir, size_guidance={"scalars": 0})
    acc.Reload()
    tags = acc.Tags()["scalars"]
    problems = []
    fields = {"loss": "loss/train", "accuracy": "accuracy/train", "lr": "lr",
              "images_per_sec": "images_per_sec"}
    steps = 0
    with open(metrics) as f:
        for line in f:
            record = json.loads(line)
            if record.get("event") != "step":
                continue
            steps += 1
            for field, tag in fields.items():
                if tag not in tags:
                    problems.append(f"no scalar tag {tag} (tags: {sorted(tags)})")
                    continue
                match = [e for e in acc.Scalars(tag) if e.step == record["step"]]
                if not match:
                    problems.append(f"{tag}: nothing at step {record['step']}")
                elif abs(match[0].value - record[field]) > 1e-6 * max(1.0, abs(record[field])):
                    problems.append(f"{tag} at step {record['step']}: {match[0].value} != "
                                    f"{record[field]}")
                elif abs(match[0].wall_time - record["time"]) > 1e-6:
                    problems.append(f"{tag} at step {record['step']}: wall time "
                                    f"{match[0].wall_time} != {record['time']}")
    if steps == 0:
        problems.append(f"{metrics} has no step records")
    for p in sorted(set(problems))[:20]:
        print(p)
    print(f"{steps} step records, tags {sorted(tags)}: "
          f"{'OK' if not problems else f'{len(problems)} problems'}")
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
