#include "launcher/flags/flag_engine.h"

#include <algorithm>
#include <cstdlib>

#include "CLI/CLI.hpp"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/strip.h"

namespace mxrun {
namespace {

// Keys a configuration file may hold beyond the flags, for a program that runs a command.
constexpr const char* kEntrypointKey = "entrypoint";
constexpr const char* kArgsKey = "args";

std::string Dashed(absl::string_view name) { return absl::StrReplaceAll(name, {{"_", "-"}}); }

}  // namespace

const FlagValue& FlagValues::operator[](absl::string_view name) const {
  auto it = values_.find(name);
  if (it == values_.end()) std::abort();  // a group names a flag no group declares
  return it->second;
}

std::string FlagValues::Trimmed(absl::string_view name) const {
  return std::string(absl::StripAsciiWhitespace(Text(name)));
}

std::string FlagValues::Lower(absl::string_view name) const {
  return absl::AsciiStrToLower(Trimmed(name));
}

bool FlagValues::Bool(absl::string_view name) const {
  const std::string lower = Lower(name);
  return lower == "1" || lower == "true" || lower == "yes" || lower == "on";
}

absl::Status FlagValues::Invalid(absl::string_view name, absl::string_view what,
                                 absl::string_view accepted) const {
  const FlagValue& value = (*this)[name];
  return absl::InvalidArgumentError(absl::StrCat(value.source, "='", value.text,
                                                 "' is not valid: ", what,
                                                 accepted.empty() ? "" : "; accepted: ", accepted));
}

absl::Status FlagValues::From(absl::string_view name, const absl::Status& error,
                              absl::string_view separator) const {
  return absl::InvalidArgumentError(absl::StrCat((*this)[name].source, separator, error.message()));
}

absl::StatusOr<int> FlagValues::Int(absl::string_view name, int min, int max,
                                    absl::string_view accepted) const {
  int number = 0;
  if (!absl::SimpleAtoi(Trimmed(name), &number)) return Invalid(name, "not an integer", accepted);
  if (number < min || number > max) return Invalid(name, "out of range", accepted);
  return number;
}

absl::StatusOr<double> FlagValues::Seconds(absl::string_view name) const {
  double number = 0;
  if (!absl::SimpleAtod(Trimmed(name), &number) || number < 0 || number > 1e7) {
    return Invalid(name, "not a number of seconds", "a number >= 0");
  }
  return number;
}

absl::StatusOr<std::chrono::milliseconds> FlagValues::Duration(absl::string_view name) const {
  absl::StatusOr<double> seconds = Seconds(name);
  if (!seconds.ok()) return seconds.status();
  return std::chrono::milliseconds(static_cast<long long>(*seconds * 1000.0));
}

void FlagValues::Imply(absl::string_view name, std::string text, std::string source) {
  (void)(*this)[name];  // declared
  values_[std::string(name)] = FlagValue{std::move(text), std::move(source), true, true};
}

FlagSpec EnvSetting(std::string name, std::string variable, std::string help) {
  FlagSpec spec;
  spec.name = std::move(name);
  spec.help = std::move(help);
  spec.stand_in_env = std::move(variable);
  spec.file_key = false;
  spec.env_only = true;
  return spec;
}

FlagSpec ConfigFileFlag(const ProgramFlags& program) {
  FlagSpec spec{"config", "", false,
                absl::StrCat("TOML file: flags as keys",
                             program.takes_command ? ", plus entrypoint and args" : ""),
                ""};
  spec.file_key = false;
  return spec;
}

FlagSpec PrintConfigFlag(const ProgramFlags& program) {
  FlagSpec spec{"print_config", "", true,
                program.takes_command
                    ? "check the configuration as a launch would, then print it with each value's "
                      "source"
                    : "check the settings, then print them with each value's source",
                ""};
  spec.file_key = false;
  return spec;
}

absl::StatusOr<ResolvedFlags> ResolveFlags(const ProgramFlags& program,
                                           const std::vector<FlagSpec>& flags, int argc,
                                           const char* const* argv,
                                           const std::map<std::string, std::string>& env) {
  CLI::App app{program.description, program.name};
  if (program.takes_command) app.prefix_command();
  if (!program.version.empty()) app.set_version_flag("--version", program.version);
  std::map<std::string, std::string> cli_text;
  std::map<std::string, bool> cli_flag;
  for (const FlagSpec& flag : flags) {
    if (flag.env_only) continue;
    std::string names = absl::StrCat("--", flag.name);
    if (Dashed(flag.name) != flag.name) absl::StrAppend(&names, ",--", Dashed(flag.name));
    if (!flag.short_name.empty()) absl::StrAppend(&names, ",", flag.short_name);
    std::string help = absl::StrCat(flag.help, flag.default_value.empty() ? "" : " (default ",
                                    flag.default_value, flag.default_value.empty() ? "" : ")");
    if (flag.boolean) {
      app.add_flag(names, cli_flag[flag.name], help);
    } else if (!flag.implicit_value.empty()) {
      app.add_option(names, cli_text[flag.name], help)->expected(0, 1);
    } else {
      app.add_option(names, cli_text[flag.name], help);
    }
  }
  std::vector<std::string> args;
  for (int i = argc - 1; i > 0; --i) args.emplace_back(argv[i]);  // CLI11 wants them reversed
  ResolvedFlags resolved;
  try {
    app.parse(args);
  } catch (const CLI::CallForHelp&) {
    resolved.help_text = app.help();
    return resolved;
  } catch (const CLI::CallForVersion&) {
    resolved.help_text = absl::StrCat(program.version, "\n");
    return resolved;
  } catch (const CLI::ParseError& e) {
    return absl::InvalidArgumentError(e.what());
  }

  // A flag's value from the command line or the environment, the sources above a configuration
  // file; nullopt when none of them gives it.
  auto from_command_line_or_env = [&](const FlagSpec& flag) -> std::optional<FlagValue> {
    if (flag.env_only) {
      auto it = env.find(flag.stand_in_env);
      if (it == env.end()) return std::nullopt;
      return FlagValue{it->second, flag.stand_in_env, true};
    }
    const std::string option = absl::StrCat("--", flag.name);
    if (app.count(option) > 0) {
      std::string text = flag.boolean ? (cli_flag[flag.name] ? "1" : "0") : cli_text[flag.name];
      if (text.empty() && !flag.implicit_value.empty()) text = flag.implicit_value;
      return FlagValue{std::move(text), option, true};
    }
    const std::string upper = absl::AsciiStrToUpper(flag.name);
    for (const std::string& prefix : program.env_prefixes) {
      const std::string name = prefix + upper;
      if (auto it = env.find(name); it != env.end()) return FlagValue{it->second, name, true};
    }
    if (!flag.stand_in_env.empty()) {
      if (auto it = env.find(flag.stand_in_env); it != env.end() && !it->second.empty()) {
        return FlagValue{it->second, flag.stand_in_env, true};
      }
    }
    return std::nullopt;
  };
  auto declared = [&](absl::string_view name) -> const FlagSpec* {
    for (const FlagSpec& flag : flags) {
      if (flag.name == name) return &flag;
    }
    return nullptr;
  };

  // The configuration file, when the program has --config and one is named.
  std::optional<ConfigFile> file;
  if (const FlagSpec* config = declared("config")) {
    if (std::optional<FlagValue> path = from_command_line_or_env(*config);
        path && !path->text.empty()) {
      absl::StatusOr<ConfigFile> read = ReadConfigFile(path->text);
      if (!read.ok()) return read.status();
      file = std::move(*read);
    }
  }
  std::map<std::string, const ConfigEntry*> file_entries;
  if (file) {
    for (const ConfigEntry& entry : file->entries) {
      const FlagSpec* flag = declared(entry.key);
      if (flag != nullptr && !flag->file_key) flag = nullptr;
      const bool command_key =
          program.takes_command && (entry.key == kEntrypointKey || entry.key == kArgsKey);
      if (flag == nullptr && !command_key &&
          std::find(program.foreign_file_keys.begin(), program.foreign_file_keys.end(),
                    entry.key) != program.foreign_file_keys.end()) {
        continue;  // another program's setting in a shared file
      }
      const std::string where = absl::StrCat(file->path, ":", entry.line, ": ");
      if (flag == nullptr && !command_key) {
        std::string accepted;
        for (const FlagSpec& f : flags) {
          if (f.file_key) absl::StrAppend(&accepted, f.name, ", ");
        }
        if (program.takes_command) {
          absl::StrAppend(&accepted, kEntrypointKey, ", ", kArgsKey);
        } else if (!accepted.empty()) {
          accepted.resize(accepted.size() - 2);
        }
        return absl::InvalidArgumentError(
            absl::StrCat(where, "unknown key '", entry.key, "'; accepted: ", accepted));
      }
      if (entry.is_table && !(flag != nullptr && flag->key_value_list)) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, "'", entry.key, "' takes a single value, not a table"));
      }
      if (entry.is_array != (command_key && entry.key == kArgsKey)) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, "'", entry.key, "' ",
                         entry.is_array ? "takes a single value, not an array"
                                        : "is a list of strings: args = [\"--lr\", \"0.1\"]"));
      }
      file_entries[entry.key] = &entry;
    }
  }

  for (const FlagSpec& flag : flags) {
    std::optional<FlagValue> value = from_command_line_or_env(flag);
    if (!value) {
      if (auto it = file_entries.find(flag.name); it != file_entries.end() && flag.file_key) {
        const ConfigEntry& entry = *it->second;
        value = FlagValue{entry.values.front(),
                          absl::StrCat(file->path, ":", entry.line, ": ", flag.name), true};
        if (flag.boolean) {
          if (value->text != "true" && value->text != "false") {
            return absl::InvalidArgumentError(
                absl::StrCat(value->source, "='", value->text,
                             "' is not valid: not a boolean; accepted: true or false"));
          }
          value->text = value->text == "true" ? "1" : "0";
        }
      } else {
        value = FlagValue{flag.default_value, "default", false};
      }
    }
    resolved.values.Set(flag.name, std::move(*value));
  }

  if (program.takes_command) {
    resolved.command = app.remaining();
    if (!resolved.command.empty() && resolved.command.front() == "--") {
      resolved.command.erase(resolved.command.begin());
    }
    resolved.command_source = "command line";
    if (resolved.command.empty() && file_entries.count(kEntrypointKey) > 0) {
      const ConfigEntry& entry = *file_entries[kEntrypointKey];
      resolved.command.push_back(entry.values.front());
      resolved.command_source = absl::StrCat(file->path, ":", entry.line);
      if (auto it = file_entries.find(kArgsKey); it != file_entries.end()) {
        resolved.command.insert(resolved.command.end(), it->second->values.begin(),
                                it->second->values.end());
      }
    }
    if (!resolved.command.empty() && absl::StartsWith(resolved.command.front(), "-") &&
        resolved.command.front() != "-") {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown flag '", resolved.command.front(), "' before the entrypoint; run '",
                       program.name, " --help' for the flags ", program.name, " accepts"));
    }
  }
  return resolved;
}

std::string FormatEffectiveConfig(const ProgramFlags& program, const std::vector<FlagSpec>& flags,
                                  const ResolvedFlags& resolved) {
  auto quote = [](const std::string& text) {  // a TOML basic string
    return absl::StrCat(
        "\"",
        absl::StrReplaceAll(text, {{"\\", "\\\\"}, {"\"", "\\\""}, {"\n", "\\n"}, {"\t", "\\t"}}),
        "\"");
  };
  std::string out = absl::StrCat(
      "# ", program.name, "'s effective configuration (precedence: ", program.precedence, ")\n");
  for (const FlagSpec& flag : flags) {
    if (!flag.file_key) continue;
    const FlagValue& v = resolved.values[flag.name];
    const std::string text =
        flag.boolean ? (resolved.values.Bool(flag.name) ? "true" : "false") : quote(v.text);
    absl::StrAppend(&out, flag.name, " = ", text, "  # ", v.source, "\n");
  }
  const std::vector<std::string>& command = resolved.command;
  if (!command.empty()) {
    absl::StrAppend(&out, kEntrypointKey, " = ", quote(command.front()), "  # ",
                    resolved.command_source, "\n", kArgsKey, " = [");
    for (std::size_t i = 1; i < command.size(); ++i) {
      absl::StrAppend(&out, i > 1 ? ", " : "", quote(command[i]));
    }
    absl::StrAppend(&out, "]\n");
  }
  return out;
}

}  // namespace mxrun
