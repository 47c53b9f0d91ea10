#!/usr/bin/env bash
# The network-fault suite's figures: runs build/bin/mxrun_fault_tests RUNS times (default 3) and
# prints, for each fault, what mxrun did and the medians of the times each case measured (the
# "fault suite:" lines the tests print). The cases in network namespaces need root; where they
# cannot run, the table says so. Nothing is left running: every case checks that itself.
#
# Environment: RUNS (default 3), FAULT_TESTS (default <repo>/build/bin/mxrun_fault_tests).
set -euo pipefail

script_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo_root="$(cd "$script_dir/../.." && pwd)"
RUNS="${RUNS:-3}"
FAULT_TESTS="${FAULT_TESTS:-$repo_root/build/bin/mxrun_fault_tests}"
case "$RUNS" in ''|*[!0-9]*|0) echo "faults.sh: RUNS must be a positive integer" >&2; exit 2;; esac
[ -x "$FAULT_TESTS" ] || { echo "faults.sh: not found or not executable: $FAULT_TESTS (build: cd build && ninja mxrun_fault_tests)" >&2; exit 2; }
workdir="$(mktemp -d "${TMPDIR:-/tmp}/mxrun-faults.XXXXXX")"
trap 'rm -rf -- "$workdir"' EXIT

echo "## The network-fault suite"
echo
echo "- command: \`RUNS=$RUNS $0\`"
echo "- date: $(date -u '+%Y-%m-%d %H:%M:%S UTC'); nproc=$(nproc); repo at $(git -C "$repo_root" rev-parse --short HEAD 2>/dev/null || echo unknown)"
echo "- load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
status=0
for i in $(seq 1 "$RUNS"); do
  if ! "$FAULT_TESTS" > "$workdir/run$i.log" 2>&1; then
    echo "faults.sh: run $i failed; its log:" >&2
    tail -40 "$workdir/run$i.log" >&2
    status=1
  fi
  echo "faults.sh: run $i of $RUNS done" >&2
done

python3 - "$workdir" "$RUNS" <<'PY'
import glob, os, re, statistics, sys

work, runs = sys.argv[1], int(sys.argv[2])
cases = {}  # text with numbers replaced by {} -> list of number lists
skipped = False
for path in sorted(glob.glob(os.path.join(work, "run*.log"))):
    text = open(path).read()
    skipped = skipped or "fault suite skipped" in text
    for line in text.splitlines():
        if not line.startswith("fault suite: "):
            continue
        body = line[len("fault suite: "):]
        numbers = [float(x) for x in re.findall(r"\d+\.\d+", body)]
        key = re.sub(r"\d+\.\d+", "{}", body)
        cases.setdefault(key, []).append(numbers)
print("| fault | what mxrun did (medians of %d runs; nothing lost, nothing left running) | runs |" % runs)
print("|---|---|---:|")
for key, values in cases.items():
    fault, _, what = key.partition(": ")
    med = [statistics.median(v[i] for v in values) for i in range(len(values[0]))]
    print(f"| {fault} | {what.format(*[f'{m:.2f}' for m in med])} | {len(values)} |")
if skipped:
    print()
    print("The network-namespace cases were skipped here (see the log for why).")
PY
exit "$status"
