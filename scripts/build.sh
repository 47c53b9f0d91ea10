#!/usr/bin/env bash
# Configures and builds mxrun (and the trainer when LibTorch is present) into build/, or into
# $MXRUN_BUILD_DIR when set.
# Usage: scripts/build.sh [extra cmake -D options]
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
if [[ ! -f "$build/build.ninja" ]]; then
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@"
elif [[ $# -gt 0 ]]; then
  cmake "$build" "$@"
fi
cmake --build "$build" -j "$(nproc)"
