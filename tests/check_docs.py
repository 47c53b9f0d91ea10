#!/usr/bin/env python3
"""The documents stay findable (issue 59): a short README that leads into a guide by task, and no
link that leads nowhere.

  check_docs.py REPO

Checks, printing one line per failure and exiting 1 if any:
  1. README.md is a landing page: at most 12 KB; every page under docs/ at most 40 KB (the
     generated reference pages are built into build/, not kept in docs/).
  2. Nothing of the long pages was lost when they were split: every heading and every bold lead
     ("**...**" opening a paragraph or a list item) of the README as it was at e553bfa, and of
     docs/ARCHITECTURE.md, CONTRACT.md and BENCHMARKS.md as they were at 8f65084 (the lists in
     tests/docs/*_headings_*.txt), is still a heading or a bold lead somewhere in README.md or
     docs/.
  3. Every relative link in README.md and docs/ (Markdown's [text](target)) names a file that
     exists, and its #anchor, if any, a heading of that file (GitHub's anchors: lower case,
     punctuation dropped, spaces to dashes, a repeated heading's anchor suffixed -1, -2, ...).
  4. A reader finds each of these within two links from the README: the flag reference, the exit
     codes, the Slurm page, the in-process recovery API, the metrics list.
Standard library only; reads files, starts nothing.
"""
import glob
import os
import re
import sys

README_LIMIT = 12 * 1024
DOCS_PAGE_LIMIT = 40 * 1024
# (what a reader looks for, file, anchor or None, a phrase the target must contain)
WITHIN_TWO_LINKS = [
    ("the flag reference", "docs/CONTRACT.md", None, "--nproc_per_node"),
    ("the exit codes", "docs/guide/when-something-fails.md", "exit-codes", "Exit codes"),
    ("the Slurm page", "docs/guide/slurm.md", None, "sbatch"),
    ("the in-process recovery API", "docs/guide/your-script.md", None, "mxrun.run"),
    ("the metrics list", "docs/guide/operating.md", "metrics-prometheus", "mxrun_"),
]
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^\s*(```|~~~)")


def markdown_files(repo):
    files = ["README.md"]
    for folder, _, names in os.walk(os.path.join(repo, "docs")):
        for name in sorted(names):
            if name.endswith(".md"):
                files.append(os.path.relpath(os.path.join(folder, name), repo))
    return files


def prose_lines(text):
    """The lines outside fenced code blocks."""
    fenced = False
    for line in text.split("\n"):
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            yield line


def headings(text):
    return [m.group(2).strip() for m in (re.match(r"^(#{1,6}) (.*)$", l) for l in prose_lines(text)) if m]


def bold_leads(text):
    return [m.group(1) for m in (re.match(r"^(?:- )?(\*\*[^*]+\*\*)", l) for l in prose_lines(text)) if m]


def anchor(heading):
    heading = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link in a heading: its text
    heading = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return heading.replace(" ", "-")


def anchors(text):
    seen = {}
    result = set()
    for h in headings(text):
        a = anchor(h)
        n = seen.get(a, 0)
        result.add(a if n == 0 else f"{a}-{n}")
        seen[a] = n + 1
    return result


def links(text):
    for line in prose_lines(text):
        line = re.sub(r"`[^`]*`", "", line)  # code spans are not links
        for m in LINK.finditer(line):
            yield m.group(1)


def resolve(repo, source, target):
    """(file relative to the repo or None for an outside link, anchor or None)."""
    if re.match(r"^[a-z][a-z0-9+.-]*:", target):
        return None, None
    path, _, frag = target.partition("#")
    if not path:
        return source, frag or None
    full = os.path.normpath(os.path.join(os.path.dirname(os.path.join(repo, source)), path))
    return os.path.relpath(full, repo), frag or None


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: check_docs.py REPO")
    repo = sys.argv[1]
    failures = []
    texts = {f: open(os.path.join(repo, f), encoding="utf-8").read() for f in markdown_files(repo)}

    # 1. Sizes.
    size = len(texts["README.md"].encode())
    if size > README_LIMIT:
        failures.append(f"README.md is {size} bytes: a landing page keeps to {README_LIMIT}")
    for f, text in texts.items():
        if f.startswith("docs/") and len(text.encode()) > DOCS_PAGE_LIMIT:
            failures.append(f"{f} is {len(text.encode())} bytes: a page keeps to {DOCS_PAGE_LIMIT}: "
                            "split it by its sections")

    # 2. Every heading and bold lead of the old long pages has a home.
    homes = set()
    for text in texts.values():
        homes.update(headings(text))
        homes.update(bold_leads(text))
    lists = sorted(glob.glob(os.path.join(repo, "tests/docs/*_headings_*.txt")))
    if not lists:
        failures.append("tests/docs/ holds no *_headings_*.txt: the lists of the old pages' headings are gone")
    for path in lists:
        with open(path, encoding="utf-8") as f:
            for line in f.read().splitlines():
                kind, _, what = line.partition(": ")
                if what not in homes:
                    failures.append(f"{os.path.basename(path)}: the old {kind} {what!r} is in no page of "
                                    "README.md or docs/")

    # 3. Every relative link resolves.
    anchor_cache = {}
    graph = {}
    for source, text in texts.items():
        graph[source] = []
        for target in links(text):
            path, frag = resolve(repo, source, target)
            if path is None:
                continue
            if not os.path.exists(os.path.join(repo, path)):
                failures.append(f"{source}: link to {target}: {path} does not exist")
                continue
            graph[source].append((path, frag))
            if frag and path.endswith(".md"):
                if path not in anchor_cache:
                    body = texts.get(path) or open(os.path.join(repo, path), encoding="utf-8").read()
                    anchor_cache[path] = anchors(body)
                if frag not in anchor_cache[path]:
                    failures.append(f"{source}: link to {target}: {path} has no heading whose anchor is #{frag}")

    # 4. Within two links from the README.
    reached = {("README.md", None)}
    frontier = [("README.md", None)]
    for _ in range(2):
        nxt = []
        for page, _frag in frontier:
            for edge in graph.get(page, []):
                if edge not in reached:
                    reached.add(edge)
                    nxt.append(edge)
        frontier = nxt
    for what, path, frag, phrase in WITHIN_TWO_LINKS:
        if not any(p == path and (frag is None or f == frag) for p, f in reached):
            failures.append(f"{what} ({path}{'#' + frag if frag else ''}) is not within two links of README.md")
        elif phrase not in texts.get(path, ""):
            failures.append(f"{what}: {path} no longer says {phrase!r}: is it still the page for it?")

    for failure in failures:
        print(f"check_docs: {failure}")
    if failures:
        sys.exit(1)
    print(f"check_docs: README {size} bytes, {len(texts)} pages, every link and anchor resolves, "
          f"the old long pages' headings all have a home, {len(WITHIN_TWO_LINKS)} targets within two links")


if __name__ == "__main__":
    main()
