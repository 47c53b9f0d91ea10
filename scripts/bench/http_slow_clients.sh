#!/usr/bin/env bash
# Slow clients against mxrun's HTTP server, cpp-httplib and civetweb, side by side (issue 39):
# the same 20 KiB page from each, a scrape's time alone and while 64 idle or slow (a byte a
# second) clients hold the port, the server's RSS, and each minimal server's size. See
# http_slow_clients.py (SCRAPES, HOLD_CLIENTS). Markdown on stdout, progress on stderr.
#   scripts/bench/http_slow_clients.sh > http.md
set -euo pipefail
script_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo_root="$(cd "$script_dir/../.." && pwd)"
python="${PYTHON:-$repo_root/.venv/bin/python3}"
[ -x "$python" ] || { echo "http_slow_clients.sh: python not found: $python" >&2; exit 2; }
exec "$python" "$script_dir/http_slow_clients.py" "$@"
