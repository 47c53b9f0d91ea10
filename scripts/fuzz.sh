#!/usr/bin/env bash
# Builds mxrun's libFuzzer targets with clang (ASan + UBSan on every library they link) in the
# ASan + UBSan build, build-asan/ (scripts/sanitizer-build.sh), and runs each for FUZZ_SECONDS
# (default 60) on its corpus in tests/fuzz/corpus/ (kept in the repo; a run adds what it finds to
# a scratch copy, not to the repo, unless FUZZ_KEEP=1). A crash, a sanitizer report or a violated
# invariant fails the script and leaves the input in build-asan/findings/.
#
#   scripts/fuzz.sh                 every target
#   scripts/fuzz.sh master_state    one target (master_state, options, requests, http_request,
#                                   worker_channels, cluster_env, store_request)
#   FUZZ_SECONDS=30 scripts/fuzz.sh (what scripts/test.sh runs)
# Targets run FUZZ_JOBS at a time (default: the core count): libFuzzer runs on one core, so two
# cores fuzz two targets in the time of one, each as long as alone.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
FUZZ_SECONDS="${FUZZ_SECONDS:-60}"
case "$FUZZ_SECONDS" in ''|*[!0-9]*|0) echo "fuzz.sh: FUZZ_SECONDS must be a positive whole number" >&2; exit 2;; esac
targets=(master_state options requests http_request worker_channels cluster_env store_request)
if [ "$#" -gt 0 ]; then
  for t in "$@"; do
    [[ " ${targets[*]} " == *" $t "* ]] || { echo "fuzz.sh: unknown target '$t'; accepted: ${targets[*]}" >&2; exit 2; }
  done
  targets=("$@")
fi

build="$repo/build-asan"
"$repo/scripts/sanitizer-build.sh" address "$build"
# ccache hits across checkouts, as scripts/lib.sh.
export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$repo}" CCACHE_NOHASHDIR="${CCACHE_NOHASHDIR:-1}"
if ! "${NINJA:-/usr/bin/ninja}" -C "$build" "${targets[@]/%/_fuzz}" >"$build/build.log" 2>&1; then
  grep -E "error|FAILED" "$build/build.log" | head -20 >&2
  echo "fuzz.sh: building the fuzz targets with clang failed (the whole log: $build/build.log)" >&2
  exit 1
fi

jobs="${FUZZ_JOBS:-$(nproc)}"
case "$jobs" in ''|*[!0-9]*|0) echo "fuzz.sh: FUZZ_JOBS must be a positive whole number" >&2; exit 2;; esac

# Fuzzes one target; what it has to say goes to $build/findings/$t.said, printed in target order
# at the end, and its exit status is the verdict.
fuzz_one() {
  local t="$1" corpus="$repo/tests/fuzz/corpus/$1" work="$build/corpus/$1" said="$build/findings/$1.said"
  mkdir -p "$work"
  [ -d "$corpus" ] && cp -n "$corpus"/* "$work"/ 2>/dev/null || true
  echo "fuzz.sh: $t for ${FUZZ_SECONDS}s ($(ls "$work" | wc -l) inputs in its corpus)" >"$said"
  local rc=0
  if ! "$build/bin/${t}_fuzz" "$work" -max_total_time="$FUZZ_SECONDS" -max_len=4096 \
        -timeout=10 -rss_limit_mb=2048 -artifact_prefix="$build/findings/$t-" -print_final_stats=1 \
        > "$build/findings/$t.log" 2>&1; then
    echo "fuzz.sh: $t FAILED; input and report in $build/findings/ ($t.log):" >>"$said"
    grep -E "ERROR|invariant|SUMMARY|Test unit written" "$build/findings/$t.log" | head -8 >>"$said"
    rc=1
  else
    grep -E "stat::number_of_executed_units|stat::new_units_added" "$build/findings/$t.log" \
      | sed "s/^/fuzz.sh: $t: /" >>"$said"
  fi
  if [ "${FUZZ_KEEP:-0}" = 1 ] && [ -d "$corpus" ]; then cp -n "$work"/* "$corpus"/ 2>/dev/null || true; fi
  return "$rc"
}

mkdir -p "$build/findings"
status=0
running=0
for t in "${targets[@]}"; do
  if [ "$running" -ge "$jobs" ]; then
    wait -n || status=1
    running=$((running - 1))
  fi
  fuzz_one "$t" &
  running=$((running + 1))
done
while [ "$running" -gt 0 ]; do
  wait -n || status=1
  running=$((running - 1))
done
for t in "${targets[@]}"; do cat "$build/findings/$t.said" >&2; done
exit "$status"
