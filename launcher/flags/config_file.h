#pragma once
// mxrun's configuration files (`mxrun --config job.toml`): TOML, read by toml++ (a full TOML 1.0
// parser), with one key per flag, named like the flags (nproc_per_node = 4, nnodes = "2:4",
// standalone = true), plus `entrypoint` and `args` (an array of strings) for what to run. Values
// are kept as text for the flag engine (flag_engine.h), which checks them as it checks flags. A
// table (`rdzv_conf = { join_timeout = 30 }`, or a [rdzv_conf] section) becomes "k=v,k=v" for the
// flags that take such a list. Every error names the file and line.

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace mxrun {

struct ConfigEntry {
  std::string key;
  std::vector<std::string> values;  // one for a scalar or a table; the items of an array
  bool is_array = false;
  bool is_table = false;  // values[0] is "k=v,k=v"
  int line = 0;
};

struct ConfigFile {
  std::string path;
  std::vector<ConfigEntry> entries;  // in file order, keys unique
};

// Parses `text` (the contents of `path`, used in messages).
absl::StatusOr<ConfigFile> ParseConfigText(const std::string& path, const std::string& text);
absl::StatusOr<ConfigFile> ReadConfigFile(const std::string& path);

}  // namespace mxrun
