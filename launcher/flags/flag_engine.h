#pragma once
// One engine for every command's settings (mxrun, mxrun-master, mxrun status). It owns where a
// value comes from and in what order, --help, --print-config's listing and the error messages; the
// settings themselves are declared by the mechanisms that use them, in groups (FlagGroup), each
// filling its own config struct with the units converted once.
//
// A flag's value comes from the first of these that gives it:
//   1. the command line (--name, --name-with-dashes, or its short name);
//   2. the environment: <prefix><NAME> for each of the program's prefixes, in order
//      (mxrun: MXRUN_NPROC_PER_NODE, then PET_NPROC_PER_NODE, as torchrun reads it);
//   3. the flag's own stand-in variable, when it has one (MASTER_ADDR for --master_addr);
//   4. the --config file (TOML, config_file.h; its path itself from 1-2);
//   5. what the caller implies (mxrun: Slurm's or Kubernetes' variables): FlagValues::Imply;
//   6. the default.
// Values stay text until a group reads them, so a value from any source is checked by the same
// code with the same message: "<source>='<text>' is not valid: <what>; accepted: <accepted>".

#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "launcher/flags/config_file.h"

namespace mxrun {

struct FlagSpec {
  std::string name;        // canonical, underscores: "nproc_per_node"
  std::string short_name;  // "-m", or empty
  bool boolean = false;    // a switch: --name alone; true/false in a file
  std::string help;
  std::string default_value;
  bool file_key = true;         // may be set in a --config file (and is listed by --print-config)
  std::string stand_in_env{};   // another variable that gives it, below the prefixed ones
  bool key_value_list = false;  // k=v,k=v: a config file may also give it as a TOML table
  // Read from stand_in_env only: a knob of torchrun's environment contract (TORCHELASTIC_*), with
  // no flag, no file key, and no line in --help or --print-config.
  bool env_only = false;
  // A value flag that may be given alone on the command line (--watch), meaning this value.
  std::string implicit_value{};
};

// An environment-only setting (FlagSpec::env_only); `help` says what it does, for the manual page.
FlagSpec EnvSetting(std::string name, std::string variable, std::string help);

// A flag's value and where it came from, for messages.
struct FlagValue {
  std::string text;
  std::string source;    // "--nproc_per_node", "MXRUN_...", "FILE:LINE: key", "default", ...
  bool given = false;    // from any source but the default
  bool implied = false;  // from what the caller implies (Slurm, Kubernetes), not the user
};

class FlagValues {
 public:
  // The flag must be one the program declared (a misspelt name in a group aborts at once).
  const FlagValue& operator[](absl::string_view name) const;
  bool Given(absl::string_view name) const { return (*this)[name].given; }
  const std::string& Text(absl::string_view name) const { return (*this)[name].text; }
  std::string Trimmed(absl::string_view name) const;
  std::string Lower(absl::string_view name) const;  // trimmed, lower case
  bool Empty(absl::string_view name) const { return Trimmed(name).empty(); }
  // 1, true, yes or on (any case); anything else is false.
  bool Bool(absl::string_view name) const;
  absl::StatusOr<int> Int(absl::string_view name, int min, int max,
                          absl::string_view accepted) const;
  // Seconds, a number from 0 to 1e7.
  absl::StatusOr<double> Seconds(absl::string_view name) const;
  absl::StatusOr<std::chrono::milliseconds> Duration(absl::string_view name) const;
  // "<source>='<text>' is not valid: <what>; accepted: <accepted>".
  absl::Status Invalid(absl::string_view name, absl::string_view what,
                       absl::string_view accepted) const;
  // A parser's own error, prefixed with where the value came from ("<source><separator><error>").
  absl::Status From(absl::string_view name, const absl::Status& error,
                    absl::string_view separator = ": ") const;

  // A warning a group has about a value it does not refuse (the launch goes on and logs it).
  void Warn(std::string warning) const { warnings_.push_back(std::move(warning)); }
  const std::vector<std::string>& warnings() const { return warnings_; }

  // Sets a value no source above gave (step 5 above).
  void Imply(absl::string_view name, std::string text, std::string source);
  void Set(const std::string& name, FlagValue value) { values_[name] = std::move(value); }

 private:
  std::map<std::string, FlagValue, std::less<>> values_;
  mutable std::vector<std::string> warnings_;
};

// What one mechanism contributes: its flags (in --help's order) and how it fills its part of the
// program's configuration from the resolved values.
template <class Config>
struct FlagGroup {
  std::vector<FlagSpec> flags;
  std::function<absl::Status(const FlagValues&, Config&)> apply;
  // Groups with a lower stage are applied first: what others' defaults depend on (mxrun's
  // entrypoint decides the bundled trainer's defaults).
  int stage = 1;
};

struct ProgramFlags {
  std::string name;                       // "mxrun"
  std::string description;                // --help's first lines
  std::string version;                    // --version's line; empty: no --version
  std::vector<std::string> env_prefixes;  // {"MXRUN_", "PET_"}
  std::string precedence;                 // said by --help, --print-config and notices
  // The program runs a command given after its flags (mxrun's ENTRYPOINT [ARGS...]); a config
  // file may then give it as `entrypoint` and `args`.
  bool takes_command = false;
  // Keys a config file may hold that belong to another program sharing it (mxrun status reads
  // the job's file): accepted and ignored.
  std::vector<std::string> foreign_file_keys{};
};

// --config and --print-config, for a program's list (where its --help should show them).
FlagSpec ConfigFileFlag(const ProgramFlags& program);
FlagSpec PrintConfigFlag(const ProgramFlags& program);

struct ResolvedFlags {
  FlagValues values;
  std::vector<std::string> command;  // the command after the flags, or the file's entrypoint+args
  std::string command_source;        // "command line", or "FILE:LINE"
  std::string help_text;             // set for --help and --version: print it and exit 0
};

// Resolves every flag of `flags` in the order above (without step 5, which is the caller's).
absl::StatusOr<ResolvedFlags> ResolveFlags(const ProgramFlags& program,
                                           const std::vector<FlagSpec>& flags, int argc,
                                           const char* const* argv,
                                           const std::map<std::string, std::string>& env);

// --print-config: the effective configuration as TOML that reads back as a --config file, each
// value with its source.
std::string FormatEffectiveConfig(const ProgramFlags& program, const std::vector<FlagSpec>& flags,
                                  const ResolvedFlags& resolved);

// Every group's flags, in order.
template <class Config>
std::vector<FlagSpec> FlagsOf(const std::vector<FlagGroup<Config>>& groups) {
  std::vector<FlagSpec> out;
  for (const FlagGroup<Config>& group : groups) {
    out.insert(out.end(), group.flags.begin(), group.flags.end());
  }
  return out;
}

// Applies every group to `config`, lower stages first, then in order; the first error stops.
template <class Config>
absl::Status ApplyFlagGroups(const std::vector<FlagGroup<Config>>& groups, const FlagValues& values,
                             Config& config) {
  int max_stage = 0;
  for (const FlagGroup<Config>& group : groups) max_stage = std::max(max_stage, group.stage);
  for (int stage = 0; stage <= max_stage; ++stage) {
    for (const FlagGroup<Config>& group : groups) {
      if (group.stage != stage || !group.apply) continue;
      if (absl::Status applied = group.apply(values, config); !applied.ok()) return applied;
    }
  }
  return absl::OkStatus();
}

}  // namespace mxrun
