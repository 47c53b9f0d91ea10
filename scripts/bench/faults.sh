#!/usr/bin/env bash
# The network-fault suite's figures: runs build/bin/mxrun_fault_tests RUNS times (default 3) and
# tabulates the medians of what each case measured. See faults.py (environment: RUNS,
# FAULT_TESTS). Markdown on stdout, progress on stderr.
#   RUNS=3 scripts/bench/faults.sh
# Runs under $PYTHON (default python3: it needs no packages).
set -euo pipefail
script_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
exec "${PYTHON:-python3}" "$script_dir/faults.py" "$@"
