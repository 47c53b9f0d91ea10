#!/usr/bin/env bash
# Configures and builds mxrun (and the trainer when LibTorch is present) into build/, or into
# $MXRUN_BUILD_DIR when set. MXRUN_BUILD_TARGETS="mxrun train" builds only those targets (and what
# they need), as scripts/demo.sh does; by default everything, tests included.
# Usage: scripts/build.sh [extra cmake -D options]
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
if [[ ! -f "$build/build.ninja" ]]; then
  "$cmake" -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DMXRUN_PYTHON="$venv/bin/python3" "$@"
elif [[ $# -gt 0 ]]; then
  "$cmake" "$build" "$@"
fi
targets=()
for target in ${MXRUN_BUILD_TARGETS:-}; do targets+=(--target "$target"); done
"$cmake" --build "$build" -j "$(nproc)" "${targets[@]}"
