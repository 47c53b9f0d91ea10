#!/usr/bin/env python3
"""Reads the trainer's TensorBoard event files with TensorBoard's own code, the way its Scalars
dashboard does (the event multiplexer and data provider behind `tensorboard --logdir`), and checks
them against the --metrics_file: every step, epoch and recovery record's scalars must be there, at
the record's step, with its wall time, once.

When a job restarted from a checkpoint, the steps it trains again are in the JSONL twice and in
two event files; TensorBoard must show only the newer copies (the trainer marks the restart with a
SessionLog START at the first step trained again, as TensorFlow and PyTorch's purge_step do), so
the newest record of each step is the one compared.

Needs the `tensorboard` Python package: the project's environment (.venv/, made by
scripts/python-env.sh, which scripts/install-deps.sh runs) has it, so run this with its Python.
The integration tests that write event files (tests/integration/trainer_run_test.cc,
trainer_in_process_test.cc) run it after every such job.

  .venv/bin/python3 scripts/check_tensorboard_events.py TB_DIR METRICS_JSONL

Exit 0 when everything matches, 1 with the differences otherwise, 2 on bad arguments, a missing
folder or metrics file, or no TensorBoard package.
"""
import json
import logging
import os
import sys

if len(sys.argv) != 3:
    print(__doc__, file=sys.stderr)
    sys.exit(2)

try:
    from tensorboard import context
    from tensorboard.backend.event_processing import data_provider
    from tensorboard.backend.event_processing import plugin_event_multiplexer
    from tensorboard.util import tb_logging
except ImportError as e:
    print(f"check_tensorboard_events: TensorBoard cannot be imported by {sys.executable} ({e}): "
          "run scripts/install-deps.sh (or scripts/python-env.sh) to make the project's .venv, "
          "which has the `tensorboard` package, and run this with .venv/bin/python3",
          file=sys.stderr)
    sys.exit(2)


class CorruptRecords(logging.Handler):
    """TensorBoard's loader stops reading a file at a record whose CRC-32C is wrong and says so
    only in a debug message ("Truncated record in FILE (... failed event crc32 check)"); the
    scalars after it go missing, which is what fails the check, and this names the cause. (A
    record cut short at the end of a killed writer's file is not a CRC failure and is fine.)"""

    def __init__(self):
        super().__init__(logging.DEBUG)
        self.messages = []

    def emit(self, record):
        message = record.getMessage()
        if "crc32 check" in message:
            self.messages.append(message)
        elif record.levelno >= logging.WARNING:
            print(f"tensorboard: {message}", file=sys.stderr)


# record kind -> (record field, tag); trainer/tensorboard_writer.cc writes these.
TAGS = {
    "step": {"loss": "loss/train", "accuracy": "accuracy/train", "lr": "lr",
             "images_per_sec": "images_per_sec"},
    "epoch": {"train_loss": "loss/train_epoch", "train_accuracy": "accuracy/train_epoch",
              "images_per_sec": "images_per_sec_epoch", "test_loss": "loss/test",
              "test_accuracy": "accuracy/test"},
    "recovery": {"seconds_lost": "recovery/seconds_lost",
                 "steps_redone": "recovery/steps_redone"},
}


def expected_scalars(metrics):
    """(tag, step) -> (value, wall time) of the newest record, and the count of records per kind."""
    expected, kinds = {}, {}
    with open(metrics) as f:
        for number, line in enumerate(f, 1):
            try:
                record = json.loads(line)
            except ValueError as e:
                sys.exit(f"{metrics}:{number}: not JSON ({e})")
            fields = TAGS.get(record.get("event"), {}) if isinstance(record, dict) else {}
            if fields:
                kinds[record["event"]] = kinds.get(record["event"], 0) + 1
                if not all(isinstance(record.get(key), (int, float)) for key in ("step", "time")):
                    sys.exit(f"{metrics}:{number}: a {record['event']} record without a numeric "
                             "step and time")
            for field, tag in fields.items():
                if isinstance(record.get(field), (int, float)):
                    expected[(tag, record["step"])] = (record[field], record["time"])
    return expected, kinds


def main():
    tb_dir, metrics = sys.argv[1], sys.argv[2]
    if not os.path.isdir(tb_dir):
        print(f"check_tensorboard_events: no folder {tb_dir}", file=sys.stderr)
        sys.exit(2)
    try:
        expected, kinds = expected_scalars(metrics)
    except OSError as e:
        print(f"check_tensorboard_events: cannot read {metrics}: {e.strerror}", file=sys.stderr)
        sys.exit(2)
    corrupt = CorruptRecords()
    logger = tb_logging.get_logger()
    logger.addHandler(corrupt)
    logger.setLevel(logging.DEBUG)
    logger.propagate = False
    # Every sample kept (the server's default keeps 1,000 per scalar tag by reservoir sampling).
    multiplexer = plugin_event_multiplexer.EventMultiplexer(tensor_size_guidance={"scalars": 0})
    multiplexer.AddRunsFromDirectory(tb_dir)
    multiplexer.Reload()
    provider = data_provider.MultiplexerDataProvider(multiplexer, tb_dir)
    runs = provider.read_scalars(context.RequestContext(), experiment_id="",
                                 plugin_name="scalars", downsample=10**9)
    if list(runs) != ["."]:
        print(f"expected one run, the folder itself; TensorBoard sees {sorted(runs)}")
        sys.exit(1)
    read = runs["."]
    tags = set(read)
    problems = []
    for (tag, step), (value, wall_time) in sorted(expected.items()):
        if tag not in tags:
            problems.append(f"no scalar tag {tag}")
            continue
        match = [e for e in read[tag] if e.step == step]
        if len(match) != 1:
            problems.append(f"{tag}: {len(match)} values at step {step}, expected 1")
        elif abs(match[0].value - value) > 1e-6 * max(1.0, abs(value)):
            problems.append(f"{tag} at step {step}: {match[0].value} != {value}")
        elif abs(match[0].wall_time - wall_time) > 1e-6:
            problems.append(f"{tag} at step {step}: wall time {match[0].wall_time} != {wall_time}")
    # Nothing in the event files that the JSONL does not have.
    for tag, events in read.items():
        for e in events:
            if (tag, e.step) not in expected:
                problems.append(f"{tag} at step {e.step}: in the event files, not in {metrics}")
    if "step" not in kinds:
        problems.append(f"{metrics} has no step records")
    for m in corrupt.messages:
        print(f"TensorBoard stopped reading a file at a bad record: {m}")
    problems += corrupt.messages
    for p in sorted(set(problems) - set(corrupt.messages))[:20]:
        print(p)
    counts = ", ".join(f"{n} {kind}" for kind, n in sorted(kinds.items()))
    print(f"records: {counts}; {len(expected)} scalars expected, "
          f"{sum(len(e) for e in read.values())} read in {len(tags)} tags: "
          f"{'OK' if not problems else f'{len(problems)} problems'}")
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
