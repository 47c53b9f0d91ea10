#!/usr/bin/env bash
# Recovery and cold start, measured side by side: mxrun + the bundled trainer (in-process restart,
# and the old way for comparison) against torchrun + the PyTorch DDP reference resuming from its
# checkpoint (scripts/bench/reference/ddp_resnet.py). See recovery.py for the cases. Markdown on
# stdout.
#   RUNS=5 scripts/bench/recovery.sh
set -euo pipefail
exec /usr/bin/python3 "$(dirname "${BASH_SOURCE[0]}")/recovery.py" "$@"
