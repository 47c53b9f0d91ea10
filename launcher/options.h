#pragma once
// mxrun's command line, checked as a launch needs it: the flag groups (launch_flags/) resolved on
// the flag engine (flags/), then what only a launch needs: an entrypoint, and for --print-config
// the checks a launch makes before it starts anything. Errors are InvalidArgument with a message
// naming the flag and where its value came from, the bad value and what is accepted; main turns
// them into exit code 2.

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "launcher/launch_flags/launch_options.h"
#include "launcher/launch_flags/value_parsers.h"

namespace mxrun {

// Parses argv (argv[0] is the program name). `env` supplies the MXRUN_*, PET_*, MASTER_* and
// SLURM_* values. A request for help or the version, and --print-config, are reported as the
// returned `help_text` with no options. --print-config checks the configuration as a launch does
// first (CheckRendezvousFlags) and is an error where a launch would be one; only the entrypoint may
// be missing, and what depends on this machine (its GPUs, the entrypoint on its disk) is a warning.
struct ParseResult {
  std::optional<LaunchOptions> options;
  std::string help_text;              // set for --help / --version / --print-config
  std::vector<std::string> notices;   // one-line notes for the user (values inferred from Slurm)
  std::vector<std::string> warnings;  // what a launch logs as warnings; with --print-config also
                                      // where a launch on this machine would stop
};
absl::StatusOr<ParseResult> ParseLaunchOptions(int argc, const char* const* argv,
                                               const std::map<std::string, std::string>& env);

}  // namespace mxrun
