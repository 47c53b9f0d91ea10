#include "launcher/completion.h"

#include <set>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "agent/node/numa_binding.h"
#include "launcher/launch_flags/launch_flags.h"

namespace mxrun {
namespace {

constexpr const char* kProgram = "mxrun";

// One flag as the scripts offer it: all its spellings, what it means, what its value completes to.
struct CompletedFlag {
  std::vector<std::string> names;  // "--nproc_per_node", "--nproc-per-node"; "-r", "--redirects"
  bool takes_value = false;
  std::string help;  // with the default, as --help shows it
  ValueCompletion value;
};

// The flag table, plus --help and --version, which CLI11 adds to it (flags/flag_engine.cc).
std::vector<CompletedFlag> CompletedFlags() {
  std::vector<CompletedFlag> flags = {
      {{"-h", "--help"}, false, "print this help message and exit", {}},
      {{"--version"}, false, "print the version and exit", {}},
  };
  const std::map<std::string, ValueCompletion>& values = FlagValueCompletions();
  for (const FlagSpec& f : LaunchFlagSpecs()) {
    if (f.env_only) continue;
    CompletedFlag flag;
    if (!f.short_name.empty()) flag.names.push_back(f.short_name);
    flag.names.push_back(absl::StrCat("--", f.name));
    const std::string dashed = absl::StrReplaceAll(f.name, {{"_", "-"}});
    if (dashed != f.name) flag.names.push_back(absl::StrCat("--", dashed));
    flag.takes_value = !f.boolean;
    flag.help =
        f.default_value.empty() ? f.help : absl::StrCat(f.help, " (default ", f.default_value, ")");
    if (auto it = values.find(f.name); it != values.end()) flag.value = it->second;
    flags.push_back(std::move(flag));
  }
  return flags;
}

// ---- bash ---------------------------------------------------------------------------------------

// @FLAGS@: every spelling of every flag; @VALUE_FLAGS@: a case pattern of the flags that take a
// value; @VALUES@: the case arms that complete those values.
constexpr const char* kBashScript = R"(
# bash completion for mxrun, written by `mxrun --print-completion bash` (@VERSION@)
# from its flag table. Load it into this shell with
#   source <(mxrun --print-completion bash)
# or for every shell with bash-completion:
#   mxrun --print-completion bash > ~/.local/share/bash-completion/completions/mxrun

_mxrun() {
  local cur=${COMP_WORDS[COMP_CWORD]} word flag= prefix= entrypoint= program=0 module=0 i
  # The words before the cursor: flags, the values of those that take one, then the entrypoint,
  # after which every word is the script's.
  for ((i = 1; i < COMP_CWORD; i++)); do
    word=${COMP_WORDS[i]}
    if [[ -n $flag ]]; then
      # The flag's value ('=' first where bash split --flag=value into three words).
      [[ $word == = ]] || flag=
      continue
    fi
    case $word in
      --) entrypoint=$((i + 1)); break ;;
      =) flag='=' ;;  # a boolean flag's =value
      --no_python|--no-python) program=1 ;;
      -m|--module) module=1 ;;
      @VALUE_FLAGS@) flag=$word ;;
      -?*) ;;
      *) entrypoint=$i; break ;;
    esac
  done
  if [[ -n $entrypoint ]] && ((entrypoint < COMP_CWORD)); then
    # The script's own arguments: the shell's default completion, nothing of mxrun's.
    compopt -o default 2>/dev/null
    COMPREPLY=()
    return 0
  fi
  if [[ -z $entrypoint ]]; then
    if [[ -z $flag && $cur == --*=* ]]; then  # --flag=value as one word ('=' not a word break)
      flag=${cur%%=*} prefix=${cur%%=*}= cur=${cur#*=}
    elif [[ $cur == = ]]; then  # right after --flag= (nothing to offer for a boolean's)
      cur= flag=${flag:-=}
    fi
    if [[ -n $flag ]]; then
      COMPREPLY=()
      case $flag in
@VALUES@
      esac
      [[ -n $prefix ]] && COMPREPLY=("${COMPREPLY[@]/#/$prefix}")
      return 0
    fi
    if [[ $cur == -* ]]; then
      mapfile -t COMPREPLY < <(compgen -W '@FLAGS@' -- "$cur")
      return 0
    fi
  fi
  # The entrypoint: a script (or module), a program with --no_python, or the bundled trainer.
  compopt -o filenames 2>/dev/null
  mapfile -t COMPREPLY < <(
    compgen -f -- "$cur"
    if ((program)); then compgen -c -- "$cur"
    elif ((!module)); then compgen -W train -- "$cur"; fi)
  return 0
}
complete -F _mxrun mxrun
)";

std::string BashScript() {
  std::vector<std::string> all_names;
  std::vector<std::string> value_names;
  std::string arms;
  for (const CompletedFlag& flag : CompletedFlags()) {
    all_names.insert(all_names.end(), flag.names.begin(), flag.names.end());
    if (!flag.takes_value) continue;
    value_names.insert(value_names.end(), flag.names.begin(), flag.names.end());
    const std::string pattern = absl::StrJoin(flag.names, "|");
    const ValueCompletion& value = flag.value;
    if (!value.words.empty()) {
      absl::StrAppend(&arms, "        ", pattern, ") mapfile -t COMPREPLY < <(compgen -W '",
                      absl::StrJoin(value.words, " "), "' -- \"$cur\") ;;\n");
    } else if (value.path != ValueCompletion::Path::kNone) {
      absl::StrAppend(&arms, "        ", pattern,
                      ") compopt -o filenames 2>/dev/null\n"
                      "          mapfile -t COMPREPLY < <(compgen -",
                      value.path == ValueCompletion::Path::kFolder ? "d" : "f",
                      " -- \"$cur\") ;;\n");
    }
  }
  absl::StrAppend(&arms, "        *) ;;  # a value mxrun cannot guess");
  const char* script = kBashScript + 1;  // from the line after R"(
  return absl::StrReplaceAll(script, {{"@VERSION@", absl::StrCat(kProgram, " " MXRUN_VERSION)},
                                      {"@FLAGS@", absl::StrJoin(all_names, " ")},
                                      {"@VALUE_FLAGS@", absl::StrJoin(value_names, "|")},
                                      {"@VALUES@", arms}});
}

// ---- zsh ----------------------------------------------------------------------------------------

constexpr const char* kZshScript = R"(#compdef mxrun
# zsh completion for mxrun, written by `mxrun --print-completion zsh` (@VERSION@) from its
# flag table. Save it as _mxrun in a folder of $fpath (before compinit runs):
#   mxrun --print-completion zsh > ~/.zsh/completions/_mxrun
# or load it into this shell, after compinit:
#   source <(mxrun --print-completion zsh)

# The entrypoint: a script (or module), a program with --no_python, or the bundled trainer.
_mxrun_entrypoint() {
  local -a kinds
  kinds=('files:script or module:_files')
  if (( ${words[(I)--no(_|-)python]} )); then
    kinds+=('commands:program:_command_names -e')
  elif (( ! ${words[(I)(-m|--module)]} )); then
    kinds+=('trainer:the bundled trainer:(train)')
  fi
  _alternative $kinds
}

_mxrun() {
  local -a specs
  specs=(
@SPECS@
    ':entrypoint:_mxrun_entrypoint'
    '*::script arguments:_default'
  )
  # -A: no flag of mxrun's after the entrypoint (the words after it are the script's); -S: '--'
  # ends the flags.
  _arguments -S -A '-*' : $specs
}

if [[ ${zsh_eval_context[-1]} == loadautofunc ]]; then
  _mxrun "$@"  # autoloaded from $fpath: this file is the function
else
  compdef _mxrun mxrun
fi
)";

// Text inside a single-quoted zsh word.
std::string ZshQuoted(absl::string_view text) {
  return absl::StrReplaceAll(text, {{"'", "'\\''"}});
}

std::string ZshSpec(const CompletedFlag& flag, const std::string& name) {
  // _arguments' explanation in brackets: its own specials escaped.
  const std::string help =
      absl::StrReplaceAll(flag.help, {{"\\", "\\\\"}, {"[", "\\["}, {"]", "\\]"}, {":", "\\:"}});
  std::string spec = absl::StrCat("(", absl::StrJoin(flag.names, " "), ")", name);
  if (flag.names.front() == "-h" || flag.names.front() == "--version") {
    spec = absl::StrCat("(- *)", name);  // nothing else after them
  }
  if (flag.takes_value) absl::StrAppend(&spec, absl::StartsWith(name, "--") ? "=" : "+");
  absl::StrAppend(&spec, "[", help, "]");
  if (flag.takes_value) {
    std::string message =
        absl::StrReplaceAll(name.substr(name.find_first_not_of('-')), {{"_", " "}, {"-", " "}});
    if (name == "-r") message = "redirects";
    if (name == "-t") message = "tee";
    std::string action = " ";  // a value mxrun cannot guess: the message, no candidates
    if (!flag.value.words.empty()) {
      action = absl::StrCat("(", absl::StrJoin(flag.value.words, " "), ")");
    } else if (flag.value.path == ValueCompletion::Path::kFile) {
      action = "_files";
    } else if (flag.value.path == ValueCompletion::Path::kFolder) {
      action = "_files -/";
    }
    absl::StrAppend(&spec, ":", message, ":", action);
  }
  return absl::StrCat("    '", ZshQuoted(spec), "'\n");
}

std::string ZshScript() {
  std::string specs;
  for (const CompletedFlag& flag : CompletedFlags()) {
    for (const std::string& name : flag.names) absl::StrAppend(&specs, ZshSpec(flag, name));
  }
  if (!specs.empty()) specs.pop_back();  // the template has the line's end
  return absl::StrReplaceAll(
      kZshScript, {{"@VERSION@", absl::StrCat(kProgram, " " MXRUN_VERSION)}, {"@SPECS@", specs}});
}

}  // namespace

const std::vector<std::string>& CompletionShells() {
  static const std::vector<std::string> shells = {"bash", "zsh"};
  return shells;
}

const std::map<std::string, ValueCompletion>& FlagValueCompletions() {
  static const std::map<std::string, ValueCompletion> values = [] {
    using Path = ValueCompletion::Path;
    std::vector<std::string> numa;
    for (NumaMode mode :
         {NumaMode::kNode, NumaMode::kSocket, NumaMode::kExclusive, NumaMode::kCoreComplex}) {
      numa.push_back(NumaModeName(mode));
    }
    numa.push_back("none");
    return std::map<std::string, ValueCompletion>{
        {"nproc_per_node", {{"gpu", "cpu", "auto"}}},  // or an integer
        {"rdzv_backend", {{"static", "c10d", "etcd", "etcd-v2"}}},
        {"log_format", {{"text", "json"}}},
        {"redirects", {{"0", "1", "2", "3"}}},  // or per local rank, 0:1,1:2
        {"tee", {{"0", "1", "2", "3"}}},
        {"numa_binding", {numa}},
        {"event_log_handler", {{"null", "console"}}},
        {"start_method", {{"spawn", "fork", "forkserver"}}},  // torchrun's choices
        {"print_completion", {CompletionShells()}},
        {"config", {{}, Path::kFile}},
        {"log_dir", {{}, Path::kFolder}},
        {"rank_order", {{"auto", "host", "topology"}}},
        {"topology_file", {{}, Path::kFile}},
    };
  }();
  return values;
}

std::optional<std::string> FindPrintCompletion(int argc, const char* const* argv) {
  // Every launch passes here: the flag table is built only when the flag appears at all.
  bool mentioned = false;
  for (int i = 1; i < argc && !mentioned; ++i) {
    mentioned = absl::StartsWith(argv[i], "--print-completion") ||
                absl::StartsWith(argv[i], "--print_completion");
  }
  if (!mentioned) return std::nullopt;
  std::set<std::string, std::less<>> with_value;
  for (const CompletedFlag& flag : CompletedFlags()) {
    if (flag.takes_value) with_value.insert(flag.names.begin(), flag.names.end());
  }
  for (int i = 1; i < argc; ++i) {
    const absl::string_view word = argv[i];
    for (absl::string_view name : {"--print-completion", "--print_completion"}) {
      if (word == name) return i + 1 < argc ? argv[i + 1] : "";
      if (absl::StartsWith(word, name) && word.substr(name.size(), 1) == "=") {
        return std::string(word.substr(name.size() + 1));
      }
    }
    if (word.size() < 2 || word[0] != '-' || word == "--") return std::nullopt;  // the entrypoint
    if (with_value.count(word) > 0) ++i;                                         // its value
  }
  return std::nullopt;
}

absl::StatusOr<std::string> CompletionScript(absl::string_view shell) {
  if (shell == "bash") return BashScript();
  if (shell == "zsh") return ZshScript();
  const std::string accepted = absl::StrJoin(CompletionShells(), ", ");
  if (shell.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--print-completion needs a shell; accepted: ", accepted));
  }
  return absl::InvalidArgumentError(absl::StrCat("--print-completion='", shell,
                                                 "' is not valid: no completion for that shell; "
                                                 "accepted: ",
                                                 accepted));
}

}  // namespace mxrun
