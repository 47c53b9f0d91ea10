#!/usr/bin/env bash
# The nightly-style ThreadSanitizer run: Debian's Abseil and gRPC built with TSan (once,
# scripts/build-tsan-deps.sh), then the unit tests and the launcher's integration tests under TSan
# (scripts/sanitize.sh thread; build-tsan/). Covers the threaded parts: the HTTP server's
# connection threads, the output relay, the agent's event loop, the gRPC streams. Not in CI: the
# first run builds for ~15 minutes and the tests take ~10 (docs/guide/contributing.md, "Sanitizers", has the last result).
# Extra arguments go to ctest (e.g. -R "idle connections").
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$repo/scripts/build-tsan-deps.sh"
MXRUN_SANITIZE_TARGETS="mxrun_unit_tests mxrun_integration_tests" \
  exec "$repo/scripts/sanitize.sh" thread -L "^(unit|integration)$" "$@"
