"""The verdict on a hung job's flight-recorder dumps (`python -m mxrun._flight_verdict DIR N`).

mxrun's agent gathers every live rank's dump into DIR as rank<R>.json (`_flight_recorder.py`) and
runs this with the workers' own Python; N is the job's world size. It prints at most a few lines,
which go into the failure summary, and writes everything into DIR/analysis.txt:

* which ranks are behind: for each process group, the last collective each rank enqueued, from the
  dumps' own counters; a rank that enqueued fewer than its peers is the one they wait for, and the
  collective the others are in is named with its sizes and the script line that called it;
* PyTorch's own analyzer (torch.distributed.flight_recorder.fr_trace, fed the same dumps as its
  pickle files): ranks that never joined a collective, and mismatched collectives (type, sizes,
  state), by sequence number.

Ranks with no dump (gone, or a script that never reported progress) are named as missing; the
analyzer then runs with --allow-incomplete-ranks. Exit status 0 whatever the verdict; 2 for bad
arguments.
"""
import json
import logging
import os
import pickle
import re
import sys
import tempfile

MAX_LINES = 6  # in the summary; analysis.txt has them all
_FILE = re.compile(r"^rank(\d+)\.json$")


def load_dumps(folder):
    """{rank: dump} of every readable rank<R>.json in `folder`, and lines about unreadable ones."""
    dumps, problems = {}, []
    for name in sorted(os.listdir(folder)):
        match = _FILE.match(name)
        if not match:
            continue
        rank = int(match.group(1))
        try:
            with open(os.path.join(folder, name), encoding="utf-8") as f:
                dump = json.load(f)
            if not isinstance(dump, dict) or not isinstance(dump.get("entries"), list):
                raise ValueError("not a flight-recorder dump (no entries list)")
        except (OSError, ValueError) as e:
            problems.append(f"rank {rank}: unreadable dump {name} ({e})")
            continue
        dumps[rank] = dump
    return dumps, problems


def _call_site(entry):
    """The innermost frame of the script (not of torch) that issued a collective: 'train.py:42'."""
    frames = entry.get("frames") or []
    for frame in frames:
        filename = str(frame.get("filename", ""))
        if f"{os.sep}torch{os.sep}" in filename or filename.startswith("<"):
            continue
        return f"{os.path.basename(filename)}:{frame.get('line', '?')}"
    return ""


def _describe(entry):
    words = [str(entry.get("profiling_name", "?"))]
    if entry.get("input_sizes"):
        words.append(f"sizes {entry['input_sizes']}")
    site = _call_site(entry)
    if site:
        words.append(f"called at {site}")
    return ", ".join(words)


def _ranks_text(ranks):
    ranks = sorted(ranks)
    return ("rank " if len(ranks) == 1 else "ranks ") + ",".join(str(r) for r in ranks)


def behind(dumps):
    """Lines naming, for each group, the ranks that enqueued fewer collectives than the others."""
    lines = []
    progress = {}  # group name -> {rank: (last enqueued seq, its entry or None)}
    descs = {}
    for rank, dump in dumps.items():
        names = {}  # pg_id -> group name, from the entries
        last_entry = {}
        for entry in dump["entries"]:
            group = entry.get("process_group") or ["?", ""]
            names[str(entry.get("pg_id"))] = str(group[0])
            descs.setdefault(str(group[0]), str(group[1]) if len(group) > 1 else "")
            if not entry.get("is_p2p"):
                last_entry[(str(group[0]), entry.get("collective_seq_id"))] = entry
        for pg_id, status in (dump.get("pg_status") or {}).items():
            name = names.get(str(pg_id), str(pg_id))
            try:
                seq = int(status.get("last_enqueued_collective", -1))
            except (TypeError, ValueError, AttributeError):
                continue
            progress.setdefault(name, {})[rank] = (seq, last_entry.get((name, seq)))
    for name in sorted(progress, key=lambda n: (len(n), n)):
        by_rank = progress[name]
        ahead = max(seq for seq, _ in by_rank.values())
        late = {r for r, (seq, _) in by_rank.items() if seq < ahead}
        if not late:
            continue
        leaders = {r for r, (seq, _) in by_rank.items() if seq == ahead}
        entry = next((e for r, (s, e) in sorted(by_rank.items()) if r in leaders and e), None)
        where = f" ({_describe(entry)})" if entry else ""
        late_at = sorted({by_rank[r][0] for r in late})
        desc = f" ({descs[name]})" if descs.get(name) else ""
        lines.append(f"group {name}{desc}: {_ranks_text(late)} behind at collective "
                     f"{'/'.join(str(s) for s in late_at)}; {_ranks_text(leaders)} waiting in "
                     f"collective {ahead}{where}")
    return lines


def _analyzer_input(dumps, world_size, folder):
    """Writes the dumps as the analyzer's pickle files (rank_<R>) into `folder`."""
    everyone = str(list(range(world_size)))
    for rank, dump in dumps.items():
        record = {k: v for k, v in dump.items() if k not in ("mxrun", "nccl_comm_state")}
        groups = record.get("pg_config") or {}
        # Gloo's table in PyTorch 2.13 is {'': {ranks: '[]'}}: rebuilt from the entries, the
        # default group (name "0") holding every rank.
        if not any(key for key in groups) or any(g.get("ranks") in ("[]", "") for g in groups.values()):
            groups = {}
            for entry in record["entries"]:
                name, desc = (list(entry.get("process_group") or ["0", ""]) + [""])[:2]
                groups.setdefault(str(name), {"name": str(name), "desc": desc,
                                              "ranks": everyone if name == "0" else "[]"})
            for name, group in groups.items():  # other groups: the ranks whose dumps name them
                if group["ranks"] == "[]":
                    members = sorted(r for r, d in dumps.items()
                                     if any((e.get("process_group") or [None])[0] == name
                                            for e in d["entries"]))
                    group["ranks"] = str(members)
        record["pg_config"] = groups
        status = {}
        for pg_id, fields in (record.get("pg_status") or {}).items():
            status[str(pg_id)] = {k: int(v) for k, v in fields.items()}
        record["pg_status"] = status
        for entry in record["entries"]:
            entry.setdefault("frames", [])
        with open(os.path.join(folder, f"rank_{rank}"), "wb") as f:
            pickle.dump(record, f)


class _Collect(logging.Handler):
    def __init__(self):
        super().__init__()
        self.records = []

    def emit(self, record):
        self.records.append(record.getMessage())


_HEADERS = (("Not all ranks joining collective, sequence number: ", "did not join"),
            ("Collective sequence number: ", "mismatched"),
            ("Input/output mismatch in the collective sequence number: ", "sizes mismatched"))


def summarize_analyzer(messages):
    """One line per finding of the analyzer's log."""
    lines, block = [], None

    def close():
        if block is None:
            return
        kind, seq, fields = block
        text = f"collective {seq} ({fields.get('collective', '?')}, group {fields.get('group info', '?')}"
        if fields.get("input sizes"):
            text += f", sizes {fields['input sizes']}"
        text += ")"
        if "missing ranks" in fields:
            text += f": ranks {fields['missing ranks']} did not join"
        elif "error msg" in fields:
            text += f": {fields['error msg']}"
        else:
            text += f": {kind}"
        lines.append(text)

    for message in messages:
        header = next((h for h in _HEADERS if message.startswith(h[0])), None)
        if header:
            close()
            seq = message[len(header[0]):].split()[0] if message[len(header[0]):] else "?"
            block = (header[1], seq, {})
            continue
        if message.startswith("We cannot decide") or message.startswith("No errors found"):
            close()
            block = None
            lines.append(message.split(". ")[0])
            continue
        if block is not None and ": " in message:
            key, _, value = message.partition(": ")
            block[2].setdefault(key, value.strip())
    close()
    counted = {}  # the same finding for many entries: once, with how many
    for line in lines:
        counted[line] = counted.get(line, 0) + 1
    return [line if n == 1 else f"{line} ({n} entries)" for line, n in counted.items()]


def analyze(dumps, world_size, work_dir):
    """PyTorch's analyzer on the dumps: (summary lines, its whole log)."""
    collect = _Collect()
    try:
        # Its logger first, so that what the analyzer says at import ("tabulate is not
        # installed") is collected too rather than printed.
        from torch.distributed.flight_recorder.components.fr_logger import FlightRecorderLogger
        logger = FlightRecorderLogger().logger
        saved = logger.handlers[:]
        logger.handlers = [collect]
        logger.propagate = False
        from torch.distributed.flight_recorder import fr_trace
    except Exception as e:
        return [f"PyTorch's analyzer is not available here ({type(e).__name__}: {e})"], ""
    pickles = tempfile.mkdtemp(prefix=".analyzer-", dir=work_dir)
    _analyzer_input(dumps, world_size, pickles)
    args = [pickles, "-p", "rank_"]
    if set(range(world_size)) - set(dumps):
        args.append("--allow-incomplete-ranks")
    try:
        fr_trace.main(args)
    except BaseException as e:  # its own asserts and exits: a verdict it could not give
        collect.records.append(f"the analyzer stopped: {type(e).__name__}: {e}")
        return ([f"PyTorch's analyzer stopped: {type(e).__name__}: {e}"[:300]],
                "\n".join(collect.records))
    finally:
        logger.handlers = saved
        for name in os.listdir(pickles):
            os.unlink(os.path.join(pickles, name))
        os.rmdir(pickles)
    return summarize_analyzer(collect.records), "\n".join(collect.records)


def main(argv):
    if len(argv) != 2 or not os.path.isdir(argv[0]) or not argv[1].isdigit() or int(argv[1]) < 1:
        print("usage: python -m mxrun._flight_verdict DIR WORLD_SIZE (a folder of rank<R>.json "
              "and the job's world size, at least 1)", file=sys.stderr)
        return 2
    folder, world_size = argv[0], int(argv[1])
    dumps, problems = load_dumps(folder)
    lines = []
    missing = sorted(set(range(world_size)) - set(dumps))
    if not dumps:
        lines.append(f"no rank's dump to analyze ({world_size} expected)")
    else:
        lines += behind(dumps) or [
            "every rank enqueued the same collectives (none is behind)" if not missing else
            "the ranks dumped enqueued the same collectives"]
        found, log = analyze(dumps, world_size, folder)
        lines += [f"PyTorch's analyzer: {line}" for line in found]
    if missing:
        lines.append(f"no dump from {_ranks_text(missing)} of {world_size}")
    lines += problems
    with open(os.path.join(folder, "analysis.txt"), "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
        if dumps:
            f.write("\nPyTorch's analyzer (torch.distributed.flight_recorder.fr_trace):\n")
            f.write(log + "\n")
    shown = lines[:MAX_LINES]
    if len(lines) > MAX_LINES:
        shown.append(f"... {len(lines) - MAX_LINES} more in analysis.txt")
    print("\n".join(shown), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
