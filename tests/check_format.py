"""Checks the C++ code's format (docs/ARCHITECTURE.md "Rules the tests enforce"): every .cc and .h
the repository tracks follows .clang-format, except those in tests/format_pending.txt, which must
all still differ from it (a formatted file leaves the list), be tracked files, and be no more than
MAX_PENDING.

Usage: check_format.py CLANG_FORMAT SOURCE_DIR
"""

import os
import re
import shutil
import subprocess
import sys

# The most files the pending list may hold: lowered as files are formatted, never raised.
MAX_PENDING = 311
VIOLATION = re.compile(r"^(.+?):\d+:\d+: (?:error|warning): code should be clang-formatted",
                       re.MULTILINE)


def unformatted(clang_format: str, files: list[str]) -> set[str]:
    """The files clang-format would change, from its --dry-run reports (one call per batch)."""
    found = set()
    for start in range(0, len(files), 200):
        run = subprocess.run([clang_format, "--style=file", "--dry-run", *files[start:start + 200]],
                             capture_output=True, text=True, timeout=300)
        if run.returncode != 0 and not VIOLATION.search(run.stderr):
            raise SystemExit(f"check_format: {clang_format} failed: {run.stderr.strip()[:500]}")
        for line in run.stderr.splitlines():
            match = VIOLATION.match(line)
            if match:
                found.add(match.group(1))
    return found


def main() -> int:
    clang_format, source_dir = sys.argv[1], sys.argv[2]
    if shutil.which(clang_format) is None:
        print(f"check_format: {clang_format} not found (scripts/install-deps.sh installs "
              "clang-format-14)", file=sys.stderr)
        return 1
    listing = subprocess.run(["git", "ls-files", "*.cc", "*.h"], cwd=source_dir,
                             capture_output=True, text=True, timeout=60)
    if listing.returncode != 0:
        print(f"check_format: {source_dir} is not a git checkout", file=sys.stderr)
        return 1
    files = listing.stdout.split()
    with open(f"{source_dir}/tests/format_pending.txt", encoding="utf-8") as f:
        pending = [line.strip() for line in f if line.strip() and not line.startswith("#")]
    os.chdir(source_dir)
    differ = unformatted(clang_format, files)
    problems = []
    if len(pending) > MAX_PENDING:
        problems.append(f"tests/format_pending.txt lists {len(pending)} files, more than its cap of "
                        f"{MAX_PENDING}: format new files instead of listing them")
    tracked = set(files)
    for file in pending:
        if file not in tracked:
            problems.append(f"tests/format_pending.txt lists {file}, which the repository does not "
                            "track")
        elif file not in differ:
            problems.append(f"{file} is formatted now: take it out of tests/format_pending.txt (and "
                            "lower MAX_PENDING in tests/check_format.py)")
    for file in sorted(differ - set(pending)):
        problems.append(f"{file} does not follow .clang-format: run {clang_format} -i {file}")
    for problem in problems:
        print(f"check_format: {problem}", file=sys.stderr)
    if problems:
        return 1
    print(f"check_format: {len(files) - len(pending)} files follow .clang-format; "
          f"{len(pending)} still pending")
    return 0


if __name__ == "__main__":
    sys.exit(main())
