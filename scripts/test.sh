#!/usr/bin/env bash
# The whole test suite: installs dependencies, builds, runs every test with ctest, then every
# libFuzzer target for FUZZ_SECONDS (default 30 here) on its corpus (scripts/fuzz.sh; FUZZ_SECONDS=0
# skips them). Tests labelled gpu are skipped on machines without an NVIDIA GPU.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
"$root/scripts/install-deps.sh"
"$root/scripts/build.sh"
exclude=()
if ! have_nvidia_gpu; then
  exclude=(-LE gpu)
fi
cd "$build"
ctest --output-on-failure --timeout 600 "${exclude[@]}"
if [ "${FUZZ_SECONDS:-30}" != 0 ]; then
  FUZZ_SECONDS="${FUZZ_SECONDS:-30}" "$root/scripts/fuzz.sh"
fi
