"""Checks the C++ code's format (docs/ARCHITECTURE.md "Rules the tests enforce"): every .cc and .h
the repository tracks follows .clang-format, as clang-format-14 applies it.

Usage: check_format.py CLANG_FORMAT SOURCE_DIR
"""

import os
import re
import shutil
import subprocess
import sys

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
    os.chdir(source_dir)
    differ = sorted(unformatted(clang_format, files))
    for file in differ:
        print(f"check_format: {file} does not follow .clang-format: run {clang_format} -i {file}",
              file=sys.stderr)
    if differ:
        return 1
    print(f"check_format: all {len(files)} files follow .clang-format")
    return 0


if __name__ == "__main__":
    sys.exit(main())
