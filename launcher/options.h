#pragma once
// mxrun's command line: torchrun's flags in both spellings (--nproc_per_node, --nproc-per-node),
// each also read from PET_<FLAG> when not given, validated into one LaunchOptions value.
// Errors are InvalidArgument with a message naming the flag, the bad value and what is accepted;
// main turns them into exit code 2.

#include "absl/strings/string_view.h"
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "agent/log_spec.h"

namespace mxrun {

struct NodeRange {
  int min = 1;
  int max = 1;
};

enum class EntrypointKind { kPythonScript, kPythonModule, kExecutable, kBundledTrainer };

struct LaunchOptions {
  NodeRange nnodes;
  std::string nproc_per_node = "1";   // integer, gpu, cpu or auto (resolved later, see nproc.h)
  int node_rank = 0;
  bool node_rank_given = false;       // --node_rank or PET_NODE_RANK was set explicitly
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  std::string rdzv_backend = "static";
  std::string rdzv_endpoint;
  std::string rdzv_id = "none";
  std::map<std::string, std::string> rdzv_conf;
  bool standalone = false;
  int max_restarts = 0;
  double monitor_interval = 0.1;      // accepted for compatibility; mxrun is event-driven
  std::string role = "default";
  std::string local_addr;
  std::string log_dir;
  std::string log_format = "text";    // text | json
  PerRankStd redirects;
  PerRankStd tee;
  std::set<int> local_ranks_filter;
  std::set<int> signals_to_handle;
  double term_timeout_seconds = 30;

  EntrypointKind entrypoint_kind = EntrypointKind::kPythonScript;
  std::string entrypoint;             // script, module, program, or "train"
  std::vector<std::string> entrypoint_args;
};

// Parses argv (argv[0] is the program name). `env` supplies PET_* values. A request for help or
// the version is reported as the returned `help_text` with no options.
struct ParseResult {
  std::optional<LaunchOptions> options;
  std::string help_text;              // set for --help / --version
  std::vector<std::string> notices;   // one-line notes for the user (values inferred from Slurm)
};
absl::StatusOr<ParseResult> ParseLaunchOptions(int argc, const char* const* argv,
                                               const std::map<std::string, std::string>& env);

// "N" or "MIN:MAX" with 0 < MIN <= MAX.
absl::StatusOr<NodeRange> ParseNodeRange(absl::string_view text);
// "k=v,k=v" (empty: none).
absl::StatusOr<std::map<std::string, std::string>> ParseRdzvConf(absl::string_view text);

}  // namespace mxrun
