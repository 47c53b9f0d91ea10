#!/bin/bash
# Checks the Catch test case names that ctest runs one by one (catch_discover_tests):
#  - a ';' splits a name into two ctest tests whose filters match nothing, and Catch passes a run
#    that matched nothing, so the case silently never runs;
#  - a leading '-' is read by Catch as a command-line option.
# Usage: check_test_names.sh TEST_BINARY...
set -u
bad=0
for binary in "$@"; do
  # Catch v2 exits with the number of names it listed, so an empty list is the failure.
  names=$("$binary" --list-test-names-only)
  if [ -z "$names" ]; then
    echo "check_test_names: $binary listed no test names" >&2
    exit 1
  fi
  while IFS= read -r name; do
    case "$name" in
      *";"*) echo "$binary: a ';' in \"$name\" (ctest splits it and runs nothing)" >&2; bad=1 ;;
      -*) echo "$binary: \"$name\" starts with '-' (Catch reads it as an option)" >&2; bad=1 ;;
    esac
  done <<< "$names"
done
[ "$bad" = 0 ] && echo "checked the test names of $# binaries"
exit "$bad"
