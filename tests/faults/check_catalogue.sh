#!/bin/bash
# Every row of the fault catalogue (tests/faults/catalogue.h) has exactly one Catch case tagged
# [faults], named "fault NN ID: ..." after it, in the given test binaries; and every such case has
# its row. Usage: check_catalogue.sh CATALOGUE_H TEST_BINARY...
set -u
catalogue=$1
shift
# Rows: lines such as `    {4, "worker-oom", "a worker killed ...",`.
rows=$(grep -oE '^ *\{[0-9]+, "[a-z0-9-]+",' "$catalogue" |
       sed -E 's/^ *\{([0-9]+), "([a-z0-9-]+)",/\1 \2/' | awk '{printf "fault %02d %s\n", $1, $2}')
if [ -z "$rows" ]; then
  echo "check_catalogue: no rows found in $catalogue" >&2
  exit 1
fi
cases=""
for binary in "$@"; do
  # Catch v2 exits with the number of names it listed.
  cases+=$("$binary" --list-test-names-only "[faults]" | sed -nE 's/^(fault [0-9]+ [a-z0-9-]+):.*/\1/p')
  cases+=$'\n'
done
bad=0
while IFS= read -r row; do
  count=$(grep -cxF "$row" <<< "$cases")
  if [ "$count" != 1 ]; then
    echo "check_catalogue: row '$row' has $count test cases (one expected)" >&2
    bad=1
  fi
done <<< "$rows"
while IFS= read -r name; do
  [ -z "$name" ] && continue
  if ! grep -qxF "$name" <<< "$rows"; then
    echo "check_catalogue: test case '$name' has no row in $catalogue" >&2
    bad=1
  fi
done <<< "$cases"
[ "$bad" = 0 ] && echo "checked $(wc -l <<< "$rows") catalogue rows against their test cases"
exit "$bad"
