#pragma once
// mxrun --print-completion SHELL: a completion script for bash or zsh, written from mxrun's own
// flag table (options.h DescribeLaunchFlags), so that it names exactly the flags mxrun accepts, in
// both spellings (torchrun 2.14 has the flag too, through the optional shtab package).
//
// What the scripts complete: every flag (--nproc_per_node and --nproc-per-node, -m, -r, -t, --help,
// --version); the closed sets of values below (FlagValueCompletions); files for the entrypoint
// (and 'train', the bundled trainer; with --no_python also commands), for --config, and folders for
// --log_dir. Nothing of mxrun's after the entrypoint: the words after it are the script's own, and
// get the shell's default completion (file names).

#include <map>
#include <optional>
#include <string>
#include <vector>
#include "absl/strings/string_view.h"

#include "absl/status/statusor.h"

namespace mxrun {

// The shells --print-completion writes for, as its error message lists them.
const std::vector<std::string>& CompletionShells();

// --print-completion SHELL, --print-completion=SHELL (or --print_completion) among the words
// before the entrypoint (argv[0] is the program; words after the entrypoint, or after "--", are the
// script's): the shell named, "" when the flag ends the line; nullopt when it is not given.
std::optional<std::string> FindPrintCompletion(int argc, const char* const* argv);

// The completion script for `shell`; InvalidArgument, one line naming the accepted shells, for any
// other.
absl::StatusOr<std::string> CompletionScript(absl::string_view shell);

// What a flag's value completes to, beyond nothing.
struct ValueCompletion {
  std::vector<std::string> words;  // a closed set of values
  enum class Path { kNone, kFile, kFolder } path = Path::kNone;
};
// By canonical flag name ("rdzv_backend"); the flags not here take a value mxrun cannot guess (a
// host, a number, a job id). The closed sets are the ones options.cc accepts (tests check the two
// agree).
const std::map<std::string, ValueCompletion>& FlagValueCompletions();

}  // namespace mxrun
