"""Checks the properties ctest really gives each test (ctest --show-only=json-v1), not the ones
the CMake files ask for: Catch's catch_discover_tests passes PROPERTIES on as a flat list, so one
list-valued property ("slurm\\;faults") shifted every pair after it. The fault catalogue's Slurm rows
then ran with LABELS slurm and properties named "faults" and "600", without RUN_SERIAL, timeout or
their TMPDIR, two at once. This fails on any such test again, and on a hidden Catch case ([.])
in ctest's list, which a TEST_SPEC of exclusions only let in.

Usage: check_test_properties.py CTEST BUILD_DIR
"""

import json
import re
import subprocess
import sys

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


def main() -> int:
    ctest, build = sys.argv[1], sys.argv[2]
    listing = subprocess.run([ctest, "--show-only=json-v1"], cwd=build, capture_output=True,
                             text=True, timeout=60, check=True)
    tests = json.loads(listing.stdout)["tests"]
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
