#pragma once
// Test helper: mxrun's command line parsed from a list of arguments (without argv[0]).

#include <map>
#include <string>
#include <vector>

#include "launcher/options.h"

namespace mxrun::testing {

inline absl::StatusOr<ParseResult> ParseLaunchArgs(std::vector<std::string> args,
                                                   std::map<std::string, std::string> env = {}) {
  args.insert(args.begin(), "mxrun");
  std::vector<const char*> argv;
  for (const auto& a : args) argv.push_back(a.c_str());
  return ParseLaunchOptions(static_cast<int>(argv.size()), argv.data(), env);
}

}  // namespace mxrun::testing
