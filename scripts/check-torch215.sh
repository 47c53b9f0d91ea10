#!/usr/bin/env bash
# PyTorch 2.15, the current release, as the live reference beside the project's 2.13 (issue 58),
# in CI (scripts/test.sh runs this): what ctest compares with 2.13, again with 2.15.
#
#   scripts/check-torch215.sh
#
# 1. its TCPStore clients against mxrun's workers' store (common/store): the [store-clients] cases
#    that ctest runs with 2.13: every operation, many waiters, large values, clients that vanish,
#    init_process_group and new_group on the store;
# 2. its torchrun's worker environment diffed live against mxrun's in three layouts, and its
#    @record error files ([envdiff], with MXRUN_TEST_TORCH_ENV; the known differences are
#    docs/CONTRACT.md's, as for 2.13);
# 3. its torchrun's flags, read from its parser: every spelling known to mxrun, the defaults
#    equal (tests/python/torchrun_flag_parity.py).
# Uses .venv-cuda, made the first time (scripts/python-env.sh cuda: PyPI's torch 2.15.0, about 4 GB
# with its CUDA runtime wheels, about 2 minutes here), which scripts/gpu/check-cuda-trainer.sh
# builds the CUDA trainer against. Needs build/
# (scripts/build.sh). Prints "check-torch215: ..." per part and exits non-zero when one fails or
# the environment holds another PyTorch than the one it names.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
wanted=2.15.0
tests_bin="$build/bin/mxrun_integration_tests"
for program in "$tests_bin" "$build/bin/mxrun"; do
  [[ -x "$program" ]] || { echo "check-torch215: $program is missing: run scripts/build.sh first" >&2; exit 2; }
done

venv_next=$("$root/scripts/python-env.sh" cuda)
python="$venv_next/bin/python3"
# A CUDA build imports on a machine without a driver; what matters is that the code is 2.15's.
have=$("$python" -c 'import torch; print(torch.__version__)' 2>&1 | tail -1)
if [[ "${have%%+*}" != "$wanted" ]]; then
  echo "check-torch215: $python has torch '$have', not $wanted: remove $venv_next and run again" >&2
  exit 1
fi

log=$(mktemp)
trap 'rm -f "$log"' EXIT
status=0
# part NAME COMMAND...: runs one part, says how it went, and its log's end when it failed.
part() {
  local name="$1"
  shift
  if "$@" >"$log" 2>&1; then
    echo "check-torch215: $name: $(grep -m1 -E 'All tests passed|^torchrun-flag-parity: ' "$log")"
  else
    tail -40 "$log"
    echo "check-torch215: FAILED: $name: $*"
    status=1
  fi
}
part "PyTorch $have's TCPStore clients against mxrun's store" \
  env MXRUN_TEST_STORE_PYTHON="$python" "$tests_bin" "[store-clients]"
part "PyTorch $have's torchrun and mxrun: worker environments and @record files" \
  env MXRUN_TEST_TORCH_ENV="$venv_next" "$tests_bin" "[envdiff]"
part "PyTorch $have's torchrun flags" \
  "$python" "$root/tests/python/torchrun_flag_parity.py" "$build/bin/mxrun"
exit "$status"
