#pragma once
// mxrun's configuration file (`mxrun --config job.toml`): TOML with one key per flag, named like
// the flags (nproc_per_node = 4, nnodes = "2:4", standalone = true), plus `entrypoint` and `args`
// (an array of strings) for what to run. The subset read here is flat: comments, strings (basic
// and literal), integers, floats, booleans and arrays of those. Tables and dotted keys are refused
// rather than misread. Every error names the file and line.

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace mxrun {

struct ConfigEntry {
  std::string key;
  std::vector<std::string> values;  // one for a scalar; the items of an array
  bool is_array = false;
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
