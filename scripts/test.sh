#!/usr/bin/env bash
# The whole test suite: installs dependencies, builds, runs every test with ctest.
# Tests labelled gpu are skipped on machines without an NVIDIA GPU.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
"$root/scripts/install-deps.sh"
"$root/scripts/build.sh"
build="${MXRUN_BUILD_DIR:-$root/build}"
exclude=()
if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
  exclude=(-LE gpu)
fi
cd "$build"
ctest --output-on-failure --timeout 600 "${exclude[@]}"
