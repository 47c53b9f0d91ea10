#!/usr/bin/env bash
# The unit and integration tests once more, under a sanitizer, in a build of their own:
#   scripts/sanitize.sh address   ASan + UBSan (build-asan/; a UBSan report fails the process)
#   scripts/sanitize.sh thread    TSan (build-tsan/), with the TSan-built gRPC and Abseil of
#                                 scripts/build-tsan-deps.sh when present, and scripts/tsan.supp
# The trainer's LibTorch half is left out (LibTorch itself is not instrumented) and so are the
# gpu-labelled tests. The unit and integration programs take ~11 minutes to build on 2 cores from
# a cold compiler cache (clang; GCC took ~35); their tests about as long as the plain ones. Extra
# arguments go to ctest (e.g. -L unit; leave labels out with MXRUN_SANITIZE_SKIP_LABELS, not
# -LE). MXRUN_SANITIZE_TARGETS (space-separated) builds only those targets, and then leaves out
# the script-run cases, which need what such a build lacks: scripts/test.sh (ASan + UBSan, in CI)
# and scripts/tsan-nightly.sh (TSan) build and run the unit tests and the launcher's integration
# tests (mxrun_integration_tests) this way.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
kind="${1:-}"
case "$kind" in
  # Configured by scripts/sanitizer-build.sh; scripts/fuzz.sh shares the ASan + UBSan build.
  address) dir="$repo/build-asan" ;;
  thread) dir="$repo/build-tsan" ;;
  *) echo "usage: scripts/sanitize.sh address|thread [ctest arguments...]" >&2; exit 2 ;;
esac
shift
"$repo/scripts/install-deps.sh"
# ccache hits across checkouts, as scripts/lib.sh sets them for the plain build.
export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$repo}" CCACHE_NOHASHDIR="${CCACHE_NOHASHDIR:-1}"
"$repo/scripts/sanitizer-build.sh" "$kind" "$dir"
# shellcheck disable=SC2086  # a list of target names
"${NINJA:-/usr/bin/ninja}" -C "$dir" ${MXRUN_SANITIZE_TARGETS:-}
# Leaks are not checked in the integration tests: processes there end by signals on purpose, and
# gRPC keeps process-wide singletons.
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=0}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
export TSAN_OPTIONS="${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1:suppressions=$repo/scripts/tsan.supp}"
if [ "$kind" = thread ]; then
  # gRPC and Abseil built with TSan (scripts/build-tsan-deps.sh), loaded in place of Debian's
  # (same sonames): without them every hand-off inside gRPC is reported as a race.
  deps="${MXRUN_TSAN_DEPS:-$repo/build-tsan-deps}/lib"
  if [ -f "$deps/libgrpc++.so" ]; then
    export LD_LIBRARY_PATH="$deps${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  else
    echo "sanitize.sh: no TSan-built gRPC in $deps: the cases that use gRPC will report its" \
         "internal hand-offs; build it with scripts/build-tsan-deps.sh (~15 minutes)" >&2
  fi
fi
# A partial build: the script-run cases need the other test programs or the installed units; they
# run in the plain build.
partial=()
if [ -n "${MXRUN_SANITIZE_TARGETS:-}" ]; then
  partial=(-E "^(Catch test case names carry|the mxrun Python module: |systemd units pass|launch-node.sh and|the store benchmark's tools)")
fi
cd "$dir"
jobs="${MXRUN_CTEST_JOBS:-$(($(nproc) * 3 / 2))}"  # one and a half per core, as scripts/lib.sh
[[ "$jobs" =~ ^[1-9][0-9]*$ ]] ||
  { echo "sanitize.sh: MXRUN_CTEST_JOBS must be a positive count of tests run at once, not '$jobs'" >&2; exit 2; }
# The labels left out, in one -LE: gpu, and MXRUN_SANITIZE_SKIP_LABELS (names joined by '|'). Given
# two -LE, ctest 4.4 left out neither.
skip="${MXRUN_SANITIZE_SKIP_LABELS:-}"
[[ "$skip" =~ ^[A-Za-z0-9_|]*$ ]] ||
  { echo "sanitize.sh: MXRUN_SANITIZE_SKIP_LABELS must be label names joined by '|', not '$skip'" >&2; exit 2; }
ctest --output-on-failure --timeout 900 -j "$jobs" -LE "^(gpu${skip:+|$skip})$" "${partial[@]}" "$@"
