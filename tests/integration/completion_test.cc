// mxrun --print-completion in real shells: the bash script loaded into bash and its completion
// function called as bash calls it (COMP_WORDS, COMP_CWORD), and the zsh script loaded into an
// interactive zsh on a pseudo-terminal (zsh/zpty), with compinit, where a TAB runs zsh's own
// completion system and every candidate passed to compadd is recorded. Every run is bounded.

#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>

#include "tests/subprocess.h"
#include "tests/temp_dir.h"

using mxrun::testing::Describe;
using mxrun::testing::ProcessResult;
using mxrun::testing::ReadFile;
using mxrun::testing::Run;
using mxrun::testing::TempDir;

namespace {

const std::string kMxrun = MXRUN_BIN;
using Words = std::set<std::string>;

Words Lines(const std::string& text) {
  Words lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) lines.insert(line);
  }
  return lines;
}

// A folder with a script, a text file and a folder, for the path completions.
struct Workdir {
  TempDir dir;
  Workdir() {
    std::ofstream(dir.path() + "/train.py") << "print('hi')\n";
    std::ofstream(dir.path() + "/notes.txt") << "notes\n";
    mkdir((dir.path() + "/data").c_str(), 0755);
  }
  const std::string& path() const { return dir.path(); }
};

// The option names `mxrun --help` lists ("  -r,--redirects TEXT ..."): what `mxrun -<TAB>` offers.
Words HelpFlags() {
  ProcessResult help = Run({kMxrun, "--help"});
  REQUIRE(help.exit_code == 0);
  Words names;
  std::istringstream in(help.out);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("  -", 0) != 0) continue;
    std::istringstream first(line.substr(2, line.find(' ', 2) - 2));
    for (std::string name; std::getline(first, name, ',');) names.insert(name);
  }
  REQUIRE(names.count("--nproc-per-node") == 1);
  return names;
}

// Loads `mxrun --print-completion bash` into bash, finds the function `complete -p mxrun` names,
// and calls it as bash does for `words` with the cursor on the last word (in folder `dir`): the
// candidates it puts in COMPREPLY.
constexpr const char* kBashDriver = R"sh(
bin=$1 dir=$2; shift 2
cd "$dir" || exit 8
source <("$bin" --print-completion bash) || exit 9
spec=$(complete -p mxrun) || exit 10
function=${spec#*-F }; function=${function%% *}
COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); COMP_LINE="$*"; COMP_POINT=${#COMP_LINE}
"$function" || exit 11
printf '%s\n' "${COMPREPLY[@]}"
)sh";

Words Bash(const std::string& dir, std::vector<std::string> words) {
  std::vector<std::string> argv = {"bash", "-c", kBashDriver, "bash", kMxrun, dir};
  argv.insert(argv.end(), words.begin(), words.end());
  ProcessResult r = Run(argv, {}, std::chrono::seconds(30));
  INFO(Describe(r));
  REQUIRE(r.exit_code == 0);
  CHECK(r.err.empty());
  return Lines(r.out);
}

// An interactive zsh on a pseudo-terminal (zpty) with compinit, the completion loaded ($4: "source"
// for `source <(mxrun --print-completion zsh)`, else a folder put first in $fpath that holds it as
// _mxrun), compadd wrapped to append each candidate to $2 (the calls that only ask which words
// would match, -O/-A/-D, go through untouched), and `$3<TAB>` typed; after the completion, "<done>"
// is appended. What the terminal shows is read and dropped.
constexpr const char* kZshDriver = R"zsh(
zmodload zsh/zpty || exit 3
zpty z zsh -f -i
zpty -w z "PS1='' RPS1=''; unsetopt autolist beep"
if [[ $4 == source ]]; then
  zpty -w z "autoload -Uz compinit && compinit -u -D && source <(${(q)1} --print-completion zsh)"
else
  zpty -w z "fpath=(${(q)4} \$fpath); autoload -Uz compinit && compinit -u -D"
fi
zpty -w z "compadd() {
  if [[ \${@[1,(i)(-|--)]} == *-(O|A|D)\\ * ]]; then builtin compadd \"\$@\"; return; fi
  local -a h
  builtin compadd -O h \"\$@\"
  (( \$#h )) && print -rl -- \$h >> ${(q)2}
  builtin compadd \"\$@\"
}"
zpty -w z "_mxrun_done() { print -r -- '<done>' >> ${(q)2}; }; comppostfuncs=(_mxrun_done)"
zpty -w z "bindkey '^I' complete-word"
zpty -w -n z "$3"$'\t'
for i in {1..300}; do
  while zpty -rt z unused; do :; done
  grep -qx '<done>' $2 2>/dev/null && break
  sleep 0.05
done
zpty -d z
)zsh";

Words Zsh(const Workdir& dir, const std::string& line, const std::string& load = "source") {
  const std::string out = dir.path() + "/candidates";
  std::remove(out.c_str());
  ProcessResult r = Run({"/bin/sh", "-c", "cd \"$1\" && shift && exec zsh -f -c \"$@\"", "sh",
                         dir.path(), kZshDriver, "zsh", kMxrun, out, line, load},
                        {}, std::chrono::seconds(40));
  INFO(Describe(r));
  REQUIRE(r.exit_code == 0);
  Words words = Lines(ReadFile(out));
  INFO("completing '" << line << "'");
  REQUIRE(words.count("<done>") == 1);  // zsh's completion ran to its end
  words.erase("<done>");
  return words;
}

}  // namespace

TEST_CASE("bash completes every flag of mxrun in both spellings", "[integration][completion]") {
  Workdir dir;
  CHECK(Bash(dir.path(), {"mxrun", "--rdzv_b"}) == Words{"--rdzv_backend"});
  CHECK(Bash(dir.path(), {"mxrun", "--rdzv-b"}) == Words{"--rdzv-backend"});
  CHECK(Bash(dir.path(), {"mxrun", "--print-c"}) == Words{"--print-completion", "--print-config"});
  // Everything --help lists, and only that.
  CHECK(Bash(dir.path(), {"mxrun", "-"}) == HelpFlags());
  // Flags go on after flags and their values, in any spelling.
  CHECK(Bash(dir.path(), {"mxrun", "--rdzv_id", "job", "-r", "3", "--standalone", "--nproc-per"}) ==
        Words{"--nproc-per-node"});
  CHECK(Bash(dir.path(), {"mxrun", "--nnodes", "=", "2", "--max_r"}) == Words{"--max_restarts"});
}

TEST_CASE("bash completes the closed sets of values", "[integration][completion]") {
  Workdir dir;
  const Words backends = {"static", "c10d", "etcd", "etcd-v2"};
  CHECK(Bash(dir.path(), {"mxrun", "--rdzv_backend", ""}) == backends);
  CHECK(Bash(dir.path(), {"mxrun", "--rdzv-backend", "e"}) == Words{"etcd", "etcd-v2"});
  // --rdzv_backend=c, as bash splits it at '=' (COMP_WORDBREAKS), and as one word.
  CHECK(Bash(dir.path(), {"mxrun", "--rdzv_backend", "="}) == backends);
  CHECK(Bash(dir.path(), {"mxrun", "--rdzv_backend", "=", "c"}) == Words{"c10d"});
  CHECK(Bash(dir.path(), {"mxrun", "--rdzv_backend=c"}) == Words{"--rdzv_backend=c10d"});
  CHECK(Bash(dir.path(), {"mxrun", "--nproc_per_node", ""}) == Words{"gpu", "cpu", "auto"});
  CHECK(Bash(dir.path(), {"mxrun", "--log-format", ""}) == Words{"text", "json"});
  CHECK(Bash(dir.path(), {"mxrun", "--numa-binding", ""}) ==
        Words{"node", "socket", "exclusive", "core-complex", "none"});
  CHECK(Bash(dir.path(), {"mxrun", "--event_log_handler", ""}) == Words{"null", "console"});
  CHECK(Bash(dir.path(), {"mxrun", "--print-completion", ""}) == Words{"bash", "zsh"});
  CHECK(Bash(dir.path(), {"mxrun", "-t", ""}) == Words{"0", "1", "2", "3"});
  // A value mxrun cannot guess: nothing (not files, not flags).
  CHECK(Bash(dir.path(), {"mxrun", "--nnodes", ""}).empty());
  CHECK(Bash(dir.path(), {"mxrun", "--rdzv_id", "-"}).empty());
}

TEST_CASE("bash completes files for the entrypoint and the path flags",
          "[integration][completion]") {
  Workdir dir;
  CHECK(Bash(dir.path(), {"mxrun", "--nproc_per_node", "2", "tr"}) == Words{"train.py", "train"});
  CHECK(Bash(dir.path(), {"mxrun", "-m", "tr"}) == Words{"train.py"});
  CHECK(Bash(dir.path(), {"mxrun", "--config", "n"}) == Words{"notes.txt"});
  CHECK(Bash(dir.path(), {"mxrun", "--log_dir", ""}) == Words{"data"});  // folders only
  CHECK(Bash(dir.path(), {"mxrun", "--log-dir=d"}) == Words{"--log-dir=data"});
  const Words program = Bash(dir.path(), {"mxrun", "--no_python", "tru"});
  CHECK(program.count("true") == 1);  // a command
  CHECK(program.count("train") == 0);
  // After "--" the next word is the entrypoint, even with a dash.
  CHECK(Bash(dir.path(), {"mxrun", "--", "no"}) == Words{"notes.txt"});
}

TEST_CASE("bash completes nothing of mxrun's after the entrypoint", "[integration][completion]") {
  Workdir dir;
  CHECK(Bash(dir.path(), {"mxrun", "--standalone", "train.py", "--rdzv_b"}).empty());
  CHECK(Bash(dir.path(), {"mxrun", "train.py", "--nproc_per_node", ""}).empty());
  CHECK(Bash(dir.path(), {"mxrun", "--nproc_per_node", "2", "train", "--log_format", "t"}).empty());
  CHECK(Bash(dir.path(), {"mxrun", "--", "--rdzv_b"}).empty());
  CHECK(Bash(dir.path(), {"mxrun", "-m", "pkg.main", "-"}).empty());
}

TEST_CASE("print-completion writes the scripts and refuses other shells with exit 2",
          "[integration][completion]") {
  ProcessResult bash = Run({kMxrun, "--print-completion", "bash"});
  INFO(Describe(bash));
  CHECK(bash.exit_code == 0);
  CHECK(bash.err.empty());
  CHECK_THAT(bash.out, Catch::Contains("complete -F _mxrun mxrun"));
  // Where it is among the flags does not matter; after the entrypoint it is the script's.
  ProcessResult zsh = Run({kMxrun, "--nproc-per-node", "2", "--print_completion=zsh"});
  CHECK(zsh.exit_code == 0);
  CHECK(zsh.out.rfind("#compdef mxrun\n", 0) == 0);
  ProcessResult launched = Run({kMxrun, "--no_python", "true", "--print-completion", "bash"});
  CHECK(launched.exit_code == 0);
  CHECK(launched.out.find("_mxrun") == std::string::npos);

  TempDir dir;
  const std::string file = dir.path() + "/_mxrun";
  std::ofstream(file) << zsh.out;
  ProcessResult parsed = Run({"zsh", "-n", file});
  INFO(Describe(parsed));
  CHECK(parsed.exit_code == 0);
  std::ofstream(file) << bash.out;
  CHECK(Run({"bash", "-n", file}).exit_code == 0);

  for (std::vector<std::string> args : std::vector<std::vector<std::string>>{
           {"--print-completion", "fish"}, {"--print_completion=tcsh"}, {"--print-completion"}}) {
    args.insert(args.begin(), kMxrun);
    ProcessResult refused = Run(args);
    INFO(Describe(refused));
    CHECK(refused.exit_code == 2);
    CHECK(refused.out.empty());
    CHECK_THAT(refused.err, Catch::Contains("accepted: bash, zsh"));
    CHECK(std::count(refused.err.begin(), refused.err.end(), '\n') == 1);
  }
}

TEST_CASE("zsh completes mxrun's flags and values through its completion system",
          "[integration][completion]") {
  Workdir dir;
  CHECK(Zsh(dir, "mxrun --rdzv_b") == Words{"--rdzv_backend"});
  CHECK(Zsh(dir, "mxrun --nproc_per_node 2 --rdzv-b") == Words{"--rdzv-backend"});
  CHECK(Zsh(dir, "mxrun -") == HelpFlags());
  CHECK(Zsh(dir, "mxrun --rdzv_backend=") == Words{"static", "c10d", "etcd", "etcd-v2"});
  CHECK(Zsh(dir, "mxrun --nproc-per-node ") == Words{"gpu", "cpu", "auto"});
  CHECK(Zsh(dir, "mxrun --log_dir ") == Words{"data"});
  CHECK(Zsh(dir, "mxrun --config n") == Words{"notes.txt"});
  CHECK(Zsh(dir, "mxrun --standalone tr") == Words{"train.py", "train"});
  // After the entrypoint, the script's arguments: files, no flag of mxrun's.
  CHECK(Zsh(dir, "mxrun --standalone train.py --rdzv_b").empty());
  CHECK(Zsh(dir, "mxrun train.py n") == Words{"notes.txt"});
  // Saved as _mxrun in $fpath, as the script's header says, it completes the same way.
  TempDir fpath;
  std::ofstream(fpath.path() + "/_mxrun") << Run({kMxrun, "--print-completion", "zsh"}).out;
  CHECK(Zsh(dir, "mxrun --print-completion ", fpath.path()) == Words{"bash", "zsh"});
  CHECK(Zsh(dir, "mxrun --rdzv_b", fpath.path()) == Words{"--rdzv_backend"});
}
