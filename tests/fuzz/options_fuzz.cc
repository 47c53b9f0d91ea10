// libFuzzer target: mxrun's command line and --config file parsers on arbitrary input. Whatever
// the bytes, parsing returns a value or an InvalidArgument error with a message; it never crashes,
// hangs or reads out of bounds (the sanitizers watch).

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "launcher/flags/config_file.h"
#include "launcher/launch_flags/slurm.h"
#include "launcher/options.h"
#include "rendezvous/node_topology.h"
#include "rendezvous/wire/validation.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  // --config files (TOML through toml++, after mxrun's own check of where non-ASCII may be).
  absl::StatusOr<mxrun::ConfigFile> config = mxrun::ParseConfigText("fuzz.toml", text);
  if (!config.ok() && config.status().message().empty()) std::abort();
  // Slurm's hostlist expressions.
  absl::StatusOr<std::vector<std::string>> hosts = mxrun::ExpandHostlist(text.substr(0, 256));
  if (!hosts.ok() && hosts.status().message().empty()) std::abort();
  // --topology_file's lines, and Slurm's topology address with its pattern.
  absl::StatusOr<std::map<std::string, std::string>> places =
      mxrun::ParseTopologyFile(text, "fuzz.topology");
  if (!places.ok() && places.status().message().empty()) std::abort();
  const std::string group = mxrun::SlurmTopologyGroup(
      text.substr(0, 128), text.size() > 128 ? text.substr(128, 128) : std::string());
  (void)mxrun::ValidateTopology(group);
  // The command line: the input split at NUL bytes into arguments, and also as one value of
  // every kind of flag through the environment.
  std::vector<std::string> args = {"mxrun"};
  size_t start = 0;
  for (size_t i = 0; i <= text.size() && args.size() < 24; ++i) {
    if (i == text.size() || text[i] == '\0') {
      args.push_back(text.substr(start, i - start));
      start = i + 1;
    }
  }
  std::vector<const char*> argv;
  for (const std::string& arg : args) {
    // --config names a file to read: not the fuzzer's business (it could name /dev/zero).
    if (arg.find("config") != std::string::npos) return 0;
    if (arg.find("topology_file") != std::string::npos ||
        arg.find("topology-file") != std::string::npos) {
      return 0;  // names a file to read, as --config does
    }
    argv.push_back(arg.c_str());
  }
  std::map<std::string, std::string> env;
  const std::string value = text.substr(0, 128).c_str();
  for (const char* name : {"PET_NNODES", "PET_RDZV_CONF", "PET_REDIRECTS", "PET_LOCAL_RANKS_FILTER",
                           "PET_DUPLICATE_STDOUT_FILTERS", "PET_NUMA_BINDING",
                           "PET_LOG_LINE_PREFIX_TEMPLATE", "PET_SIGNALS_TO_HANDLE",
                           "PET_RANK_ORDER", "PET_TOPOLOGY_GROUP", "PET_LOG_COLLAPSE_WINDOW"}) {
    env[name] = value;
  }
  for (const auto& environment : {std::map<std::string, std::string>{}, env}) {
    absl::StatusOr<mxrun::ParseResult> parsed =
        mxrun::ParseLaunchOptions(static_cast<int>(argv.size()), argv.data(), environment);
    if (!parsed.ok() && parsed.status().message().empty()) std::abort();
  }
  return 0;
}
