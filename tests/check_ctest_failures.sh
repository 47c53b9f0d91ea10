#!/bin/bash
# Checks scripts/ctest-failures.sh, the end of test.sh's log, against a real ctest run: a small
# project with a passing test, a failing one (a name with a comma, quotes and a backslash, which
# awk -v would read as an escape), one past its timeout and one whose failed Catch check lies far
# above its output's end. The three must be named with the end of their output (and the check), the passing one not at all; after a run that fails nothing (the stale list
# removed, as test.sh does) it must print nothing.
# Usage: check_ctest_failures.sh SCRIPT CMAKE CTEST GENERATOR MAKE_PROGRAM
set -u
script="$1" cmake="$2" ctest="$3" generator="$4" make_program="$5"
work=$(mktemp -d "${TMPDIR:-/tmp}/ctest-failures.XXXXXX") || exit 1
trap 'rm -rf "$work"' EXIT
cat > "$work/CMakeLists.txt" <<'CMAKE'
cmake_minimum_required(VERSION 3.20)
project(probe NONE)
enable_testing()
add_test(NAME "a passing test" COMMAND sh -c "echo all well")
add_test(NAME "a failing test, with \"quotes\" and a \\t" COMMAND sh -c "seq 1 100; echo the-cause-line; exit 3")
add_test(NAME "a test past its timeout" COMMAND sh -c "echo started; exec sleep 30")
add_test(NAME "a failed Catch check, then a long log" COMMAND sh -c "printf 'x.cc:5: FAILED:\\n  CHECK( a )\\nwith expansion:\\n  the-expansion\\n'; seq 200 300; exit 1")
set_tests_properties("a test past its timeout" PROPERTIES TIMEOUT 1)
CMAKE
"$cmake" -S "$work" -B "$work/b" -G "$generator" -DCMAKE_MAKE_PROGRAM="$make_program" > /dev/null ||
  exit 1
(cd "$work/b" && "$ctest" > /dev/null 2>&1)
report=$(LINES=5 "$script" "$work/b")
bad=0
expect() {
  if ! grep -qF -- "$1" <<< "$report"; then echo "missing from the report: $1" >&2; bad=1; fi
}
expect 'test.sh: 3 test(s) failed:'
expect 'test.sh:   b: #2 a failing test, with "quotes" and a \t'
expect 'test.sh:   b: #3 a test past its timeout'
expect 'the-cause-line'
expect 'started'
# The failed check is shown though the log's last 5 lines are far past it.
expect 'x.cc:5: FAILED:'
expect 'the-expansion'
expect 'test.sh:   b: #4 a failed Catch check, then a long log'
if grep -qF 'a passing test' <<< "$report"; then echo "a passing test is named" >&2; bad=1; fi
# 5 lines of output per test: line 100 of seq is in, line 90 is not.
if grep -qx '90' <<< "$report"; then echo "more than LINES=5 lines were printed" >&2; bad=1; fi
# A later ctest run in the folder (a listing, as tests/check_test_properties.py once made) rewrites
# LastTest.log: the failed tests are still named, and the report says where their output went.
(cd "$work/b" && "$ctest" --show-only > /dev/null 2>&1)
report=$(LINES=5 "$script" "$work/b")
expect 'test.sh: 3 test(s) failed:'
expect '"a test past its timeout" (b): its output is not in '
rm -f "$work/b/Testing/Temporary/LastTestsFailed.log"
(cd "$work/b" && "$ctest" -R passing > /dev/null 2>&1)
quiet=$("$script" "$work/b")
if [ -n "$quiet" ]; then echo "a run that failed nothing printed: $quiet" >&2; bad=1; fi
if [ "$bad" != 0 ]; then printf 'the report was:\n%s\n' "$report" >&2; exit 1; fi
echo "ctest-failures.sh named the 3 failed tests with their output and failed checks, and nothing after a clean run"
