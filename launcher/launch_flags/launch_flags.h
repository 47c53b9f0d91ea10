#pragma once
// mxrun's settings: its flag groups in --help's order on the flag engine, with what Slurm and
// Kubernetes imply. The precedence (flag_engine.h): flag > MXRUN_* > PET_* (> MASTER_ADDR and
// the like) > config file > Slurm or Kubernetes > default.

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "launcher/flags/flag_engine.h"
#include "launcher/launch_flags/launch_options.h"

namespace mxrun {

const ProgramFlags& LaunchProgram();
// Every flag mxrun reads, in --help's order (--help and --version, which CLI11 adds, are not
// among them): what launcher/completion.h writes shell completion from.
const std::vector<FlagSpec>& LaunchFlagSpecs();

struct LaunchFlags {
  ResolvedFlags resolved;                // the values and their sources; help_text for --help
  std::optional<LaunchOptions> options;  // absent for --help and --version
  bool print_config = false;
  std::vector<std::string> notices;   // one-line notes for the user (values inferred from Slurm)
  std::vector<std::string> warnings;  // what a launch logs as warnings
};

// Resolves and checks every flag; `env` supplies MXRUN_*, PET_*, MASTER_* and SLURM_* values.
absl::StatusOr<LaunchFlags> ResolveLaunchFlags(int argc, const char* const* argv,
                                               const std::map<std::string, std::string>& env);

}  // namespace mxrun
