#!/usr/bin/env bash
# The soak: a 3-node trainer job on this host under a random fault every 10-30 s for SOAK_MINUTES
# (default 20), seeded (SOAK_SEED), then its checks; the report on stdout. See soak.py.
#   SOAK_MINUTES=20 SOAK_SEED=1 scripts/bench/soak.sh > soak.md
set -euo pipefail
script_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo_root="$(cd "$script_dir/../.." && pwd)"
python="${PYTHON:-$repo_root/.venv/bin/python3}"
[ -x "$python" ] || { echo "soak.sh: python not found: $python" >&2; exit 2; }
exec "$python" "$script_dir/soak.py" "$@"
