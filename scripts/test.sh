#!/usr/bin/env bash
# The whole test suite: installs dependencies, builds, runs every test with ctest, then builds the
# wheel and tests it as a user installs it (scripts/check-wheel.sh), then `pip install .`, the
# sdist and a wheel built from it (scripts/check-pip-install.sh), then compares mxrun with PyTorch
# 2.15 (its TCPStore clients, its torchrun's environment and flags: scripts/check-torch215.sh),
# then builds the Debian packages and installs them in a container booted with systemd
# (scripts/check-deb.sh), and beside those four builds the CUDA trainer against PyTorch 2.15
# (CUDA 13) and checks it on the CPU (scripts/gpu/check-cuda-trainer.sh;
# MXRUN_SKIP_CUDA_TRAINER=1 skips it in a quick developer loop, CI never does), then every
# libFuzzer target for FUZZ_SECONDS (default 30 here) on its corpus (scripts/fuzz.sh;
# FUZZ_SECONDS=0 skips them), then the unit tests and the launcher's integration tests under
# ASan + UBSan (scripts/sanitize.sh; MXRUN_SANITIZE=0 skips them outside CI). Tests labelled gpu
# are skipped on machines without an NVIDIA GPU.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# CPU ticks (user + system) of this shell's finished children, into `ticks`, from /proc: what a
# step burned on all cores together, as against its wall time (what a step leaves running is not
# counted). BASHPID, and no command substitution: the checks run beside each other in subshells.
children_cpu_ticks() {
  local stat
  read -r stat </proc/$BASHPID/stat
  read -r -a stat <<<"${stat##*) }"  # after "(comm) ": field 3 on; cutime and cstime are 16 and 17
  ticks=$((stat[13] + stat[14]))
}
ticks_per_s=$(getconf CLK_TCK)
# Each step says how long it took, and its CPU time: CI has 90 minutes for all of them on 2 cores,
# and where a step keeps both cores busy only less computing makes it shorter.
timed() {
  local name="$1" started=$SECONDS cpu_before rc=0 ticks
  shift
  children_cpu_ticks
  cpu_before=$ticks
  "$@" || rc=$?
  children_cpu_ticks
  echo "test.sh: $name took $((SECONDS - started)) s, $(((ticks - cpu_before) / ticks_per_s)) CPU-s (exit $rc; $SECONDS s in all)" >&2
  return "$rc"
}
timed install-deps "$root/scripts/install-deps.sh"
timed build "$root/scripts/build.sh"
exclude=()
if ! have_nvidia_gpu; then
  exclude=(-LE gpu)
fi
status=0
# ctest keeps a passing run's stale list of failures; ctest-failures.sh below must not read one.
rm -f "$build/Testing/Temporary/LastTestsFailed.log" "$root/build-asan/Testing/Temporary/LastTestsFailed.log"
timed ctest "$(dirname "$cmake")/ctest" --test-dir "$build" --output-on-failure --timeout 600 -j "$ctest_jobs" \
  "${exclude[@]}" || status=$?
# The wheel, `pip install .`, PyTorch 2.15's comparisons, the Debian packages and the guide's
# site, one after the other; beside them the CUDA trainer's check. Each keeps about one core busy (pip unpacking
# PyTorch, one program at a time): one after the other the first four took 407 s for 469 CPU-s.
# Each side's output comes whole when it ends, the packaging side's first.
packaging_checks() {
  local rc=0
  timed check-wheel "$root/scripts/check-wheel.sh" || rc=1
  timed check-pip-install "$root/scripts/check-pip-install.sh" || rc=1
  timed check-torch215 "$root/scripts/check-torch215.sh" || rc=1
  timed check-deb "$root/scripts/check-deb.sh" || rc=1
  timed docs "$root/scripts/build-docs.sh" --check || rc=1
  return "$rc"
}
cuda_check() {
  if [[ "${MXRUN_SKIP_CUDA_TRAINER:-0}" != 1 || "${CI:-}" == true ]]; then
    timed check-cuda-trainer "$root/scripts/gpu/check-cuda-trainer.sh"
  fi
}
side_by_side() {
  local said rc=0 packaging cuda
  said=$(mktemp -d "${TMPDIR:-/tmp}/mxrun-test-sh.XXXXXX")
  packaging_checks >"$said/packaging" 2>&1 &
  packaging=$!
  cuda_check >"$said/cuda" 2>&1 &
  cuda=$!
  wait "$packaging" || rc=1
  cat "$said/packaging"
  wait "$cuda" || rc=1
  cat "$said/cuda"
  rm -rf -- "$said"
  return "$rc"
}
timed packaging-and-cuda-checks side_by_side || status=1
if [ "${FUZZ_SECONDS:-30}" != 0 ]; then
  FUZZ_SECONDS="${FUZZ_SECONDS:-30}" timed fuzz "$root/scripts/fuzz.sh" || status=1
fi
# The unit tests and the launcher's integration tests (no LibTorch) once more under ASan + UBSan,
# in build-asan/ (MXRUN_SANITIZE=0 skips it in a quick loop; CI never does), but for the cases
# labelled python_side, whose time is the frameworks' or torchrun's Python and whose C++ other
# cases reach (tests/CMakeLists.txt). docs/guide/contributing.md ("Sanitizers") says which and
# how long.
if [[ "${MXRUN_SANITIZE:-1}" != 0 || "${CI:-}" == true ]]; then
  MXRUN_SANITIZE_TARGETS="mxrun_unit_tests mxrun_integration_tests" \
    MXRUN_SANITIZE_SKIP_LABELS=python_side timed sanitize "$root/scripts/sanitize.sh" address -L "^(unit|integration)$" || status=1
fi
# Last, where a log read from its end shows it: which tests failed, in either ctest run.
"$root/scripts/ctest-failures.sh" "$build" "$root/build-asan" >&2 || true
exit "$status"
