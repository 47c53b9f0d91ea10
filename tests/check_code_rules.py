"""The house's written rules about the code, checked (docs/ARCHITECTURE.md "Rules the tests
enforce"): which folder may include which, how long a hub may grow, and comments in the agent's
headers that name code which exists. Standard library only; run from ctest as
    python3 tests/check_code_rules.py <source dir>
Prints one line per broken rule (file:line: what, and what the rule is) and exits 1, or 0."""

import pathlib
import re
import sys

# (folder whose files are checked, include prefixes they must not use, why)
INCLUDE_RULES = [
    ("rendezvous/client/", ("rendezvous/master_state/", "rendezvous/master_server/"),
     "the agent's rendezvous client never includes the master's state machine or its server: "
     "both sides meet in rendezvous/wire/ and rendezvous/grpc/"),
    ("rendezvous/wire/", ("rendezvous/client/", "rendezvous/master_state/", "rendezvous/master_server/"),
     "rendezvous/wire/ is what both sides share: it includes neither side"),
    ("rendezvous/grpc/", ("rendezvous/client/", "rendezvous/master_state/", "rendezvous/master_server/"),
     "rendezvous/grpc/ is what both sides share: it includes neither side"),
    ("agent/", ("rendezvous/master_state/", "rendezvous/master_server/", "launcher/"),
     "the agent sees the rendezvous through rendezvous/rendezvous.h and knows nothing of the "
     "launcher that configures it"),
    ("common/", ("agent/", "launcher/", "rendezvous/", "trainer/"),
     "common/ is below everything else"),
]

# Headers of launcher/ outside the parser's own folders never include the parser: they take
# the parsed value, launcher/launch_flags/launch_options.h.
PARSER_HEADERS = ("launcher/options.h", "launcher/flags/", "launcher/launch_flags/launch_flags.h",
                  "launcher/launch_flags/groups.h")
PARSER_FOLDERS = ("launcher/flags/", "launcher/launch_flags/")

# The files every mechanism used to grow into (issue 60): each stays at most this long; a new
# mechanism gets a file of its own and reaches them through a seam.
HUBS = ["agent/elastic_agent.cc", "agent/workers/worker_group.cc", "launcher/main.cc",
        "launcher/options.cc"]
HUB_MAX_LINES = 450

# Files of other projects that comments cite (PyTorch's own sources).
EXTERNAL_PATHS = ("torch/", "c10/", "caffe2/")

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
CONSTANT = re.compile(r"\bk[A-Z][A-Za-z0-9]+\b")
FILE_NAME = re.compile(r"\b([A-Za-z0-9_./-]+\.(?:h|cc|py|sh|md))\b")


# The project's own folders (not build trees, venvs or fetched dependencies).
PROJECT_FOLDERS = ("proto", "common", "rendezvous", "agent", "launcher", "trainer", "python",
                   "scripts", "tests", "docs")


def project_files(root, suffixes):
    for folder in PROJECT_FOLDERS:
        for path in sorted((root / folder).rglob("*")):
            if path.suffix in suffixes and path.is_file():
                yield path


def sources(root, folder=""):
    if not folder:
        return list(project_files(root, (".h", ".cc")))
    return sorted(p for p in (root / folder).rglob("*") if p.suffix in (".h", ".cc") and p.is_file())


def comment_of(line):
    """The comment part of one line of C++ ('' when none; string literals are not parsed, which
    the agent's headers do not need)."""
    at = line.find("//")
    return line[at + 2:] if at >= 0 else ""


def check_includes(root, problems):
    for folder, banned, why in INCLUDE_RULES:
        for path in sources(root, folder):
            for number, line in enumerate(path.read_text().splitlines(), 1):
                match = INCLUDE.match(line)
                if match and match.group(1).startswith(banned):
                    problems.append(f"{path.relative_to(root)}:{number}: includes "
                                    f"{match.group(1)}: {why}")
    for path in sources(root, "launcher"):
        relative = str(path.relative_to(root))
        if path.suffix != ".h" or relative.startswith(PARSER_FOLDERS) or relative == "launcher/options.h":
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            match = INCLUDE.match(line)
            if match and match.group(1).startswith(PARSER_HEADERS):
                problems.append(f"{relative}:{number}: includes the parser {match.group(1)}: a "
                                "launcher header takes the parsed options, "
                                "launcher/launch_flags/launch_options.h")


def check_hubs(root, problems):
    for hub in HUBS:
        lines = len((root / hub).read_text().splitlines())
        if lines > HUB_MAX_LINES:
            problems.append(f"{hub}: {lines} lines, over the {HUB_MAX_LINES} a hub may have: give "
                            "the new mechanism a file of its own behind a seam (docs/ARCHITECTURE.md)")


def check_agent_comments(root, problems):
    code_text = []
    names = set()
    for path in sources(root):
        code_text.append("\n".join(line.split("//")[0] for line in path.read_text().splitlines()))
    for path in list(project_files(root, (".h", ".cc", ".py", ".sh", ".md"))) + list(root.glob("*.md")):
        names.add(path.name)
        names.add(str(path.relative_to(root)))
    code = "\n".join(code_text)
    defined = set(CONSTANT.findall(code))
    for path in sources(root, "agent"):
        if path.suffix != ".h":
            continue
        relative = path.relative_to(root)
        for number, line in enumerate(path.read_text().splitlines(), 1):
            comment = comment_of(line)
            for constant in CONSTANT.findall(comment):
                if constant not in defined:
                    problems.append(f"{relative}:{number}: the comment names {constant}, which "
                                    "no code defines or uses")
            for name in FILE_NAME.findall(comment):
                if name.startswith(EXTERNAL_PATHS):
                    continue
                if name not in names and name.split("/")[-1] not in names:
                    problems.append(f"{relative}:{number}: the comment names {name}, which is "
                                    "no file of this tree")
    check_exit_codes(root, problems)


def check_exit_codes(root, problems):
    """agent/elastic_agent.h's header comment lists every exit code it defines."""
    header = root / "agent/elastic_agent.h"
    text = header.read_text()
    codes = {int(value) for value in re.findall(r"constexpr int kExit\w+ = (\d+);", text)}
    listed_at = text.find("// Exit codes")
    if listed_at < 0:
        problems.append("agent/elastic_agent.h: no '// Exit codes' comment listing the exit codes")
        return
    block = []
    for line in text[listed_at:].splitlines():
        if not line.startswith("//"):
            break
        block.append(line)
    listed = " ".join(block)
    for code in sorted(codes):
        if not re.search(rf"(?<![0-9+]){code}(?![0-9])", listed):
            problems.append(f"agent/elastic_agent.h: the '// Exit codes' comment leaves out {code}, "
                            "which a kExit constant below defines")


def main():
    if len(sys.argv) != 2:
        print("usage: check_code_rules.py <source dir>", file=sys.stderr)
        return 2
    root = pathlib.Path(sys.argv[1]).resolve()
    problems = []
    check_includes(root, problems)
    check_hubs(root, problems)
    check_agent_comments(root, problems)
    for problem in problems:
        print(problem)
    print(f"check_code_rules: {len(problems)} broken rule(s)" if problems else
          "check_code_rules: every rule holds")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
