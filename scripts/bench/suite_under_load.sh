#!/usr/bin/env bash
# The whole ctest suite RUNS times in a row (default 5) on a fresh clone of HEAD, with a CPU load
# beside it: LOAD busy loops (default one per core) at the suite's own priority, as another job
# on a shared CI machine would be. It builds the clone once (scripts/install-deps.sh,
# scripts/build.sh), then runs `ctest -LE gpu` RUNS times without stopping at a failure; a
# markdown report on stdout (each run: wall time, passed, failed and their names), each run's log
# in OUT (default a temporary folder, named in the report). Exit 0 only when every run passed.
# CLONE=<folder> runs in a clone already built by scripts/build.sh instead (the one .ci/run just
# built, say: a fresh machine spends most of an hour on its first build); it must be a clone with
# no change to a tracked file and a build/ folder.
#   RUNS=5 scripts/bench/suite_under_load.sh > under-load.md
#   RUNS=2 CLONE=/tmp/ci-clone scripts/bench/suite_under_load.sh > under-load.md
#   RUNS=2 LOAD=1 CTEST_ARGS="-L unit" scripts/bench/suite_under_load.sh   (a quick try of it)
# It takes hours on 2 cores (a run ~20 minutes alone, about twice that under the load): run it on
# a machine doing nothing else. Kills only the load it started.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
runs="${RUNS:-5}"
load="${LOAD:-$(nproc)}"
out="${OUT:-$(mktemp -d /tmp/mxrun-under-load.XXXXXX)}"
[[ "$runs" =~ ^[1-9][0-9]*$ ]] || { echo "suite_under_load.sh: RUNS must be a positive integer, not '$runs'" >&2; exit 2; }
[[ "$load" =~ ^[0-9]+$ ]] || { echo "suite_under_load.sh: LOAD must be a count of busy loops (0 or more), not '$load'" >&2; exit 2; }
mkdir -p "$out"
if [[ -n "${CLONE:-}" ]]; then
  clone="$CLONE"
  if [[ ! -d "$clone/build" ]] || ! git -C "$clone" rev-parse --git-dir > /dev/null 2>&1; then
    echo "suite_under_load.sh: CLONE must be a git clone built by scripts/build.sh (with build/), not '$clone'" >&2
    exit 2
  fi
  [[ -z "$(git -C "$clone" status --porcelain --untracked-files=no)" ]] ||
    { echo "suite_under_load.sh: CLONE '$clone' has changes to tracked files; the runs need a clean clone" >&2; exit 2; }
  origin="the built clone $clone"
else
  clone="$out/clone"
  rm -rf "$clone"
  git clone -q "$repo" "$clone"
  origin="a fresh clone of $repo"
  echo "suite_under_load: building $(git -C "$clone" rev-parse --short HEAD) in $clone" >&2
  (cd "$clone" && scripts/install-deps.sh && scripts/build.sh) > "$out/build.log" 2>&1 ||
    { echo "suite_under_load.sh: the build failed; see $out/build.log" >&2; exit 1; }
fi
commit="$(git -C "$clone" rev-parse --short HEAD)"

load_pids=()
stop_load() { for pid in "${load_pids[@]}"; do kill "$pid" 2>/dev/null || true; done; }
trap stop_load EXIT
for ((i = 0; i < load; i++)); do
  bash -c 'while :; do :; done' &
  load_pids+=("$!")
done

echo "## The suite $runs times in a row under load"
echo
echo "- commit: $commit ($origin), $(date -u '+%Y-%m-%d %H:%M UTC')"
echo "- machine: nproc=$(nproc), $(uname -r); load: $load busy loop(s) beside the suite"
echo "- command: \`RUNS=$runs LOAD=$load${CLONE:+ CLONE=$CLONE}${CTEST_ARGS:+ CTEST_ARGS=\"$CTEST_ARGS\"} scripts/bench/suite_under_load.sh\`; logs in $out"
echo
echo "| run | wall | passed | failed | failed tests |"
echo "|---:|---:|---:|---:|---|"
green=0
for ((run = 1; run <= runs; run++)); do
  log="$out/run-$run.log"
  start=$(date +%s)
  rc=0
  # shellcheck disable=SC2086  # CTEST_ARGS: more ctest arguments, split on spaces
  (cd "$clone/build" && /usr/bin/ctest --output-on-failure --timeout 600 -LE gpu ${CTEST_ARGS:-}) \
    > "$log" 2>&1 || rc=$?
  wall=$(( $(date +%s) - start ))
  total=$(sed -n 's/.*tests passed, \([0-9]*\) tests failed out of \([0-9]*\).*/\2/p' "$log" | tail -1)
  failed=$(sed -n 's/.*tests passed, \([0-9]*\) tests failed out of.*/\1/p' "$log" | tail -1)
  [ -n "$total" ] || total=$(sed -n 's/.*tests passed out of \([0-9]*\).*/\1/p' "$log" | tail -1)
  failed="${failed:-0}"
  names=$(grep -E '^\s+[0-9]+ - ' "$log" | sed -E 's/^\s+[0-9]+ - //; s/ \((Failed|Timeout|Not Run)\).*$/ (\1)/' |
    paste -sd ';' - | sed 's/;/; /g' || true)  # grep finds nothing in a green run
  # A run that found no test (a CTEST_ARGS that matches nothing) is not green.
  [ "$rc" = 0 ] && [ "${total:-0}" -gt 0 ] && green=$((green + 1))
  echo "| $run | $((wall / 60)) min $((wall % 60)) s | $(( ${total:-0} - failed )) | $failed | ${names:-} |"
  echo "suite_under_load: run $run of $runs: rc $rc, $failed failed, ${wall}s" >&2
done
echo
echo "Green: $green of $runs."
[ "$green" = "$runs" ]
