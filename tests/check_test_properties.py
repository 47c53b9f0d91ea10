"""Checks the properties ctest really gives each test (ctest --show-only=json-v1), not the ones
the CMake files ask for: Catch's catch_discover_tests passes PROPERTIES on as a flat list, so one
list-valued property ("slurm\\;faults") shifted every pair after it. The fault catalogue's Slurm rows
then ran with LABELS slurm and properties named "faults" and "600", without RUN_SERIAL, timeout or
their TMPDIR, two at once. This fails on any such test again, and on a hidden Catch case ([.])
in ctest's list, which a TEST_SPEC of exclusions only let in.

It lists from a copy of the build's CTestTestfile.cmake files: any ctest run, --show-only too,
rewrites Testing/Temporary/LastTest.log in its folder, and this case runs inside test.sh's ctest,
whose failed tests' output scripts/ctest-failures.sh reads from that log at the end.

Usage: check_test_properties.py CTEST BUILD_DIR
"""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

PROPERTY_NAME = re.compile(r"^[A-Z][A-Z0-9_]*$")


def hidden_cases_of(known: dict, binary: str) -> set:
    """The names of a Catch binary's hidden cases, listed once per binary."""
    if binary not in known:
        try:
            listing = subprocess.run([binary, "--list-test-names-only", "[.]"],
                                     capture_output=True, text=True, timeout=60, check=False)
            known[binary] = {line.strip() for line in listing.stdout.splitlines() if line.strip()}
        except OSError:  # a program a partial build (scripts/sanitize.sh) leaves out
            known[binary] = set()
    return known[binary]


def listed_tests(ctest: str, build: str) -> list:
    """ctest's list of the build's tests, taken in a scratch copy of its CTestTestfile.cmake
    tree (they include the generated lists by absolute path), so that the build's own
    LastTest.log is left as the running ctest writes it."""
    with tempfile.TemporaryDirectory(prefix="ctest-list.") as scratch:
        copied = 0
        for folder, _, files in os.walk(build):
            if "CTestTestfile.cmake" in files:
                target = os.path.join(scratch, os.path.relpath(folder, build))
                os.makedirs(target, exist_ok=True)
                shutil.copy(os.path.join(folder, "CTestTestfile.cmake"), target)
                copied += 1
        if copied == 0:
            raise SystemExit(f"check_test_properties: no CTestTestfile.cmake under {build}")
        listing = subprocess.run([ctest, "--show-only=json-v1"], cwd=scratch,
                                 capture_output=True, text=True, timeout=60, check=True)
    return json.loads(listing.stdout)["tests"]


def main() -> int:
    ctest, build = sys.argv[1], sys.argv[2]
    tests = listed_tests(ctest, build)
    problems = []
    catch_cases = 0
    hidden_cases = {}  # a Catch binary -> its hidden ([.]) case names
    for test in tests:
        name = test["name"]
        # Catch's stand-in for a test program a partial build (scripts/sanitize.sh) leaves out.
        if re.search(r"_NOT_BUILT(-[0-9a-f]+)?$", name):
            continue
        properties = {p["name"]: p["value"] for p in test.get("properties", [])}
        for key in properties:
            if not PROPERTY_NAME.match(key):
                problems.append(f"{name!r}: a property named {key!r} (a list flattened into "
                                f"PROPERTIES shifts every name and value after it)")
        labels = properties.get("LABELS", [])
        if not labels:
            problems.append(f"{name!r}: no label (test.sh and ctest -L select by label)")
        if "slurm" in labels and properties.get("RUN_SERIAL") is not True:
            problems.append(f"{name!r}: labelled slurm without RUN_SERIAL (Slurm cases run alone)")
        command = test.get("command") or []
        # The Catch cases ctest runs one by one: each with its timeout and the tests' own TMPDIR.
        if command and re.search(r"/bin/mxrun_\w+_tests$", command[0]):
            catch_cases += 1
            if "TIMEOUT" not in properties:
                problems.append(f"{name!r}: a Catch case without its TIMEOUT")
            if "mxrun_test_tmpdir" not in properties.get("FIXTURES_REQUIRED", []):
                problems.append(f"{name!r}: a Catch case without the tests' TMPDIR fixture")
            # A TEST_SPEC of exclusions only ("~[tag]") lets Catch's hidden cases in: they ran in
            # CI and failed (they are run by hand, with what they need).
            if name in hidden_cases_of(hidden_cases, command[0]):
                problems.append(f"{name!r}: a hidden Catch case ([.]) that ctest runs (a "
                                f"TEST_SPEC of exclusions only needs ~[.] too)")
    if catch_cases == 0:
        problems.append("no Catch case found in ctest's list: the check checked nothing")
    for problem in problems:
        print(f"check_test_properties: {problem}", file=sys.stderr)
    if problems:
        return 1
    print(f"checked the properties of {len(tests)} tests ({catch_cases} Catch cases)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
