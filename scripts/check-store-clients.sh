#!/usr/bin/env bash
# PyTorch 2.15's TCPStore clients against mxrun's workers' store (common/store), in CI
# (scripts/test.sh runs this): the same [store-clients] cases that ctest runs with the project's
# PyTorch 2.13 and scripts/gpu/check-cuda-trainer.sh with 2.14.1: every operation, many waiters,
# large values, clients that vanish, init_process_group and new_group on the store.
#
#   scripts/check-store-clients.sh
#
# Makes .venv-torch215 the first time (scripts/python-env.sh torch215: PyPI's torch 2.15.0, about
# 4 GB with its CUDA runtime wheels, about 2 minutes here), then reuses it. Needs
# build/bin/mxrun_integration_tests (scripts/build.sh). Prints "check-store-clients: ..." and exits
# non-zero when a case fails or the environment holds another PyTorch than the one it names.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
wanted=2.15.0
tests_bin="$build/bin/mxrun_integration_tests"
[[ -x "$tests_bin" ]] || { echo "check-store-clients: $tests_bin is missing: run scripts/build.sh first" >&2; exit 2; }

venv_next=$("$root/scripts/python-env.sh" torch215)
python="$venv_next/bin/python3"
# A CUDA build imports on a machine without a driver; what matters is that the clients are 2.15's.
have=$("$python" -c 'import torch; print(torch.__version__)' 2>&1 | tail -1)
if [[ "${have%%+*}" != "$wanted" ]]; then
  echo "check-store-clients: $python has torch '$have', not $wanted: remove $venv_next and run again" >&2
  exit 1
fi

log=$(mktemp)
trap 'rm -f "$log"' EXIT
if MXRUN_TEST_STORE_PYTHON="$python" "$tests_bin" "[store-clients]" >"$log" 2>&1; then
  echo "check-store-clients: PyTorch $have's TCPStore clients against mxrun's store: $(grep -m1 'All tests passed' "$log")"
else
  tail -40 "$log"
  echo "check-store-clients: FAILED: PyTorch $have's TCPStore clients: MXRUN_TEST_STORE_PYTHON=$python $tests_bin \"[store-clients]\""
  exit 1
fi
