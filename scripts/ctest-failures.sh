#!/usr/bin/env bash
# Names the tests that failed in the last ctest run of each build folder given, with the end of
# each one's output and, before it, the first Catch checks that failed ("FILE:LINE: FAILED:" and
# the lines after it): a fixture that prints its daemons' logs on failure pushes those out of the
# end. test.sh calls it last: a CI log is often read from its end only, and there ctest's own
# report of a failure lies 30 minutes of output further up, behind the ASan run.
#   scripts/ctest-failures.sh BUILD_DIR [BUILD_DIR...]   (LINES=N lines of output per test, 25)
# ctest leaves LastTestsFailed.log in place after a run that fails nothing, so the caller removes it
# before each run (test.sh does). Prints nothing where no test failed. Exit: 0, or 2 for bad usage.
set -euo pipefail
lines="${LINES:-25}"
failed_checks=2       # Catch's "FAILED:" blocks shown per test
failed_check_lines=30 # lines after each: the check, its expansion, its messages (INFO)
if [[ $# -eq 0 || ! "$lines" =~ ^[1-9][0-9]{0,3}$ ]]; then
  echo "usage: [LINES=1..9999] scripts/ctest-failures.sh BUILD_DIR [BUILD_DIR...]" >&2
  exit 2
fi
names=()
for dir in "$@"; do
  failed="$dir/Testing/Temporary/LastTestsFailed.log"
  log="$dir/Testing/Temporary/LastTest.log"
  [[ -s "$failed" ]] || continue
  # Each line of LastTestsFailed.log is "NUMBER:NAME".
  while IFS= read -r entry; do
    name="${entry#*:}"
    names+=("$(basename "$dir"): #${entry%%:*} $name")
    [[ -f "$log" ]] || continue
    # A test's block in LastTest.log runs from "N/M Test: NAME" to its "time elapsed" line.
    # Its rulers and start and end times say nothing; the elapsed time closes it. The name comes
    # in through the environment: awk -v would turn a "\t" in it into a tab and find nothing.
    output=$(TEST_NAME="$name" awk '
      BEGIN { name = ENVIRON["TEST_NAME"] }
      $0 ~ /^[0-9]+\/[0-9]+ Test: / && substr($0, index($0, "Test: ") + 6) == name { inside = 1 }
      !inside || /^----------+$/ { next }
      index($0, "\"" name "\" start time:") == 1 || index($0, "\"" name "\" end time:") == 1 { next }
      { print }
      index($0, "\"" name "\" time elapsed:") == 1 { inside = 0 }
    ' "$log")
    checks=$(grep -A "$failed_check_lines" -m "$failed_checks" -e ': FAILED:$' <<< "$output" || true)
    if [[ -n "$checks" ]]; then
      echo "--- the first failed checks of \"$name\" ($(basename "$dir")) ---"
      printf '%s\n' "$checks"
    fi
    if [[ -z "$output" ]]; then
      # Another ctest run in this folder (--show-only too) rewrote LastTest.log after this one.
      echo "--- \"$name\" ($(basename "$dir")): its output is not in $log, which a later ctest" \
        "run in that folder replaced; ctest's own report (--output-on-failure) above has it ---"
      continue
    fi
    echo "--- the last $lines lines of \"$name\" ($(basename "$dir")) ---"
    tail -n "$lines" <<< "$output"
  done < "$failed"
done
if ((${#names[@]} > 0)); then
  echo "test.sh: ${#names[@]} test(s) failed:"
  printf 'test.sh:   %s\n' "${names[@]}"
fi
