// mxrun --print-completion: the scripts are written from the flag table, so they must name every
// flag in every spelling, and offer exactly the values the parser accepts where the set is closed.
// (tests/integration/completion_test.cc runs them in real shells.)
#include <catch2/catch.hpp>

#include <set>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "launcher/completion.h"
#include "launcher/launch_flags/launch_flags.h"
#include "tests/unit/parse_launch_args.h"

namespace {

using mxrun::CompletionScript;
using mxrun::FlagSpec;
using mxrun::ValueCompletion;

std::string Script(const std::string& shell) {
  absl::StatusOr<std::string> script = CompletionScript(shell);
  INFO(script.status().ToString());
  REQUIRE(script.ok());
  return *script;
}

// Every spelling of a flag of the table: "--nproc_per_node", "--nproc-per-node"; "-r",
// "--redirects".
std::vector<std::string> Spellings(const FlagSpec& flag) {
  std::vector<std::string> names = {"--" + flag.name};
  const std::string dashed = absl::StrReplaceAll(flag.name, {{"_", "-"}});
  if (dashed != flag.name) names.push_back("--" + dashed);
  if (!flag.short_name.empty()) names.push_back(flag.short_name);
  return names;
}

// The option names --help lists ("  -r,--redirects TEXT  ..." lines), CLI11's own included.
std::set<std::string> HelpFlagNames() {
  auto help = mxrun::testing::ParseLaunchArgs({"--help"});
  REQUIRE(help.ok());
  std::set<std::string> names;
  std::istringstream in(help->help_text);
  for (std::string line; std::getline(in, line);) {
    if (!absl::StartsWith(line, "  -")) continue;
    const std::string first = line.substr(2, line.find(' ', 2) - 2);
    for (absl::string_view name : absl::StrSplit(first, ',')) names.emplace(name);
  }
  return names;
}

// The bash script's lists: the words it completes a flag from (`compgen -W '-h --help ...'`), the
// flags it knows to take a value (the case pattern before `flag=$word`), and for each flag that
// takes a closed set of values, that set (its case arm).
struct BashLists {
  std::set<std::string> flags;
  std::set<std::string> value_flags;
  std::map<std::string, std::set<std::string>> values;
};
BashLists ReadBash(const std::string& script) {
  BashLists lists;
  std::istringstream in(script);
  for (std::string line; std::getline(in, line);) {
    absl::string_view text = absl::StripLeadingAsciiWhitespace(line);
    if (absl::StartsWith(text, "mapfile -t COMPREPLY < <(compgen -W '-")) {
      text.remove_prefix(text.find('\'') + 1);
      for (absl::string_view w : absl::StrSplit(text.substr(0, text.find('\'')), ' ')) {
        lists.flags.emplace(w);
      }
    } else if (absl::EndsWith(text, ") flag=$word ;;")) {
      text.remove_suffix(std::string(") flag=$word ;;").size());
      for (absl::string_view w : absl::StrSplit(text, '|')) lists.value_flags.emplace(w);
    } else if (absl::StartsWith(text, "-") && absl::StrContains(text, ") mapfile") &&
               absl::StrContains(text, "compgen -W '")) {
      const absl::string_view pattern = text.substr(0, text.find(')'));
      absl::string_view words = text.substr(text.find("compgen -W '") + 12);
      words = words.substr(0, words.find('\''));
      for (absl::string_view name : absl::StrSplit(pattern, '|')) {
        for (absl::string_view w : absl::StrSplit(words, ' ')) {
          lists.values[std::string(name)].emplace(w);
        }
      }
    }
  }
  return lists;
}

// The zsh script's _arguments specs, by option name: "(excl)--name=[help]:message:action".
struct ZshSpec {
  bool takes_value = false;
  std::string action;
};
std::map<std::string, ZshSpec> ReadZsh(const std::string& script) {
  std::map<std::string, ZshSpec> specs;
  std::istringstream in(script);
  for (std::string line; std::getline(in, line);) {
    if (!absl::StartsWith(line, "    '(")) continue;
    absl::string_view spec = line;
    spec.remove_prefix(spec.find(')') + 1);
    const size_t bracket = spec.find('[');
    absl::string_view name = spec.substr(0, bracket);
    ZshSpec parsed;
    if (absl::ConsumeSuffix(&name, "=") || absl::ConsumeSuffix(&name, "+")) {
      parsed.takes_value = true;
      // The action: after the last unescaped ':' (help text colons are escaped as "\:").
      const size_t colon = spec.rfind(':');
      parsed.action = std::string(spec.substr(colon + 1, spec.size() - colon - 2));  // not the '
    }
    specs[std::string(name)] = parsed;
  }
  return specs;
}

// The accepted values an error message lists after "accepted: ": "static, c10d, etcd or etcd-v2",
// "node, socket, exclusive or core-complex (or none)", or the quoted ones
// ("'gpu', 'cpu' or 'auto'").
std::set<std::string> AcceptedWords(absl::string_view message) {
  absl::string_view accepted = message.substr(message.find("accepted: ") + 10);
  std::set<std::string> words;
  if (absl::StrContains(accepted, '\'')) {
    std::vector<absl::string_view> parts = absl::StrSplit(accepted, '\'');
    for (size_t i = 1; i < parts.size(); i += 2) words.emplace(parts[i]);
    return words;
  }
  const std::string list =
      absl::StrReplaceAll(accepted, {{" (or ", ", "}, {")", ""}, {" or ", ", "}});
  for (absl::string_view w : absl::StrSplit(list, ", ")) {
    words.emplace(absl::StripAsciiWhitespace(w));
  }
  return words;
}

}  // namespace

TEST_CASE("the bash completion names every flag of the table in every spelling", "[completion]") {
  const BashLists bash = ReadBash(Script("bash"));
  REQUIRE_FALSE(bash.flags.empty());
  for (const FlagSpec& flag : mxrun::LaunchFlagSpecs()) {
    if (flag.env_only) continue;  // no flag to complete
    for (const std::string& name : Spellings(flag)) {
      INFO(name);
      CHECK(bash.flags.count(name) == 1);
      CHECK(bash.value_flags.count(name) == (flag.boolean ? 0 : 1));
    }
  }
  // And everything --help lists (CLI11's -h, --help and --version too), nothing else.
  CHECK(bash.flags == HelpFlagNames());
}

TEST_CASE("the zsh completion has a spec for every flag of the table in every spelling",
          "[completion]") {
  const std::map<std::string, ZshSpec> zsh = ReadZsh(Script("zsh"));
  for (const FlagSpec& flag : mxrun::LaunchFlagSpecs()) {
    if (flag.env_only) continue;  // no flag to complete
    for (const std::string& name : Spellings(flag)) {
      INFO(name);
      REQUIRE(zsh.count(name) == 1);
      CHECK(zsh.at(name).takes_value == !flag.boolean);
    }
  }
  std::set<std::string> names;
  for (const auto& [name, spec] : zsh) names.insert(name);
  CHECK(names == HelpFlagNames());
}

TEST_CASE("both scripts offer each closed set of values and the paths", "[completion]") {
  const BashLists bash = ReadBash(Script("bash"));
  const std::map<std::string, ZshSpec> zsh = ReadZsh(Script("zsh"));
  const std::string bash_text = Script("bash");
  for (const FlagSpec& flag : mxrun::LaunchFlagSpecs()) {
    if (flag.env_only) continue;  // no flag to complete
    auto it = mxrun::FlagValueCompletions().find(flag.name);
    if (it == mxrun::FlagValueCompletions().end()) continue;
    const ValueCompletion& value = it->second;
    const std::set<std::string> words(value.words.begin(), value.words.end());
    for (const std::string& name : Spellings(flag)) {
      INFO(name);
      REQUIRE(zsh.count(name) == 1);
      if (!words.empty()) {
        CHECK(bash.values.count(name) == 1);
        if (bash.values.count(name) == 1) CHECK(bash.values.at(name) == words);
        std::set<std::string> zsh_words;
        absl::string_view action = zsh.at(name).action;
        REQUIRE(absl::ConsumePrefix(&action, "("));
        REQUIRE(absl::ConsumeSuffix(&action, ")"));
        for (absl::string_view w : absl::StrSplit(action, ' ')) zsh_words.emplace(w);
        CHECK(zsh_words == words);
      } else if (value.path == ValueCompletion::Path::kFolder) {
        CHECK(zsh.at(name).action == "_files -/");
      } else if (value.path == ValueCompletion::Path::kFile) {
        CHECK(zsh.at(name).action == "_files");
      }
    }
  }
  // The sets the brief names, and the paths.
  const auto& values = mxrun::FlagValueCompletions();
  CHECK(values.at("rdzv_backend").words ==
        std::vector<std::string>{"static", "c10d", "etcd", "etcd-v2"});
  CHECK(values.at("nproc_per_node").words == std::vector<std::string>{"gpu", "cpu", "auto"});
  CHECK(values.at("print_completion").words == std::vector<std::string>{"bash", "zsh"});
  CHECK(values.at("config").path == ValueCompletion::Path::kFile);
  CHECK(values.at("log_dir").path == ValueCompletion::Path::kFolder);
  CHECK_THAT(bash_text, Catch::Contains("--config) compopt -o filenames"));
  CHECK_THAT(bash_text, Catch::Contains("--log_dir|--log-dir) compopt -o filenames"));
}

TEST_CASE("the closed sets of values are the ones the parser accepts", "[completion]") {
  std::set<std::string> table;
  for (const FlagSpec& flag : mxrun::LaunchFlagSpecs()) table.insert(flag.name);
  for (const auto& [name, value] : mxrun::FlagValueCompletions()) {
    INFO("--" << name);
    REQUIRE(table.count(name) == 1);  // a flag that was renamed or removed
    for (const std::string& word : value.words) {
      INFO(word);
      auto parsed = mxrun::testing::ParseLaunchArgs({"--" + name, word, "x.py"});
      INFO(parsed.status().ToString());
      CHECK(parsed.ok());
    }
    // Where the parser lists what it accepts, that list is the set (nothing missing, no extra).
    auto refused = mxrun::testing::ParseLaunchArgs({"--" + name, "no-such-value", "x.py"});
    if (!value.words.empty() && !refused.ok() &&
        absl::StrContains(refused.status().message(), "accepted: ")) {
      INFO(refused.status().message());
      CHECK(AcceptedWords(refused.status().message()) ==
            std::set<std::string>(value.words.begin(), value.words.end()));
    }
  }
}

TEST_CASE("print-completion is found only among the flags before the entrypoint", "[completion]") {
  auto find = [](std::vector<const char*> args) {
    args.insert(args.begin(), "mxrun");
    return mxrun::FindPrintCompletion(static_cast<int>(args.size()), args.data());
  };
  CHECK(find({"--print-completion", "bash"}) == "bash");
  CHECK(find({"--print_completion", "zsh"}) == "zsh");
  CHECK(find({"--print-completion=zsh"}) == "zsh");
  CHECK(find({"--print_completion=fish"}) == "fish");
  CHECK(find({"--print-completion"}) == "");
  CHECK(find({"--nproc_per_node", "2", "-r", "3", "--standalone", "--print-completion", "bash"}) ==
        "bash");
  CHECK(find({"x.py", "--print-completion", "bash"}) == std::nullopt);       // the script's
  CHECK(find({"-m", "pkg", "--print-completion", "bash"}) == std::nullopt);  // -m is boolean
  CHECK(find({"--", "--print-completion", "bash"}) == std::nullopt);
  CHECK(find({"--rdzv_id", "--print-completion", "x.py"}) == std::nullopt);  // --rdzv_id's value
  CHECK(find({"--print-completionx", "bash", "x.py"}) == std::nullopt);
  CHECK(find({"x.py"}) == std::nullopt);
}

TEST_CASE("print-completion refuses other shells in one line naming bash and zsh", "[completion]") {
  for (const std::string shell : {"fish", "tcsh", "", "BASH"}) {
    INFO(shell);
    absl::StatusOr<std::string> script = CompletionScript(shell);
    REQUIRE_FALSE(script.ok());
    CHECK(script.status().code() == absl::StatusCode::kInvalidArgument);
    const std::string message(script.status().message());
    CHECK_THAT(message, Catch::Contains("accepted: bash, zsh"));
    CHECK_FALSE(absl::StrContains(message, '\n'));
  }
  // The flag itself is in --help, with its shells.
  auto help = mxrun::testing::ParseLaunchArgs({"--help"});
  REQUIRE(help.ok());
  CHECK_THAT(help->help_text, Catch::Contains("--print_completion,--print-completion"));
}
