#pragma once
// Helpers for tests that run the bundled trainer as a process: a small, quick configuration and
// its --metrics_file records.

#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "tests/subprocess.h"
#include "tests/temp_dir.h"

namespace mxrun::testing {

// `command` (the trainer, or a launcher and the trainer) with a small, quick configuration:
// ResNet-18 at 1/8 width on synthetic data, checkpoints and metrics inside `dir`; then `extra`.
inline std::vector<std::string> SmallRun(std::vector<std::string> command, const TempDir& dir,
                                         const std::vector<std::string>& extra) {
  const std::vector<std::string> small{
      "--width", "8", "--synthetic_train", "2048", "--synthetic_test", "512", "--batch_size", "32",
      "--lr", "0.05", "--ckpt_dir", dir.path() + "/ckpt", "--metrics_file",
      dir.path() + "/metrics.jsonl"};
  command.insert(command.end(), small.begin(), small.end());
  command.insert(command.end(), extra.begin(), extra.end());
  return command;
}

// The environment overrides that make the trainer run alone, as one process, even when the test
// itself runs under a launcher: no torchrun variables at all.
inline std::map<std::string, std::string> NoLauncherEnv() {
  return {{"RANK", ""}, {"WORLD_SIZE", ""}, {"MASTER_PORT", ""}, {"MASTER_ADDR", ""},
          {"LOCAL_RANK", ""}};
}

// The --metrics_file records of one event kind ("" for all), in order.
inline std::vector<nlohmann::json> Metrics(const TempDir& dir, const std::string& event) {
  std::vector<nlohmann::json> records;
  std::istringstream in(ReadFile(dir.path() + "/metrics.jsonl"));
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    nlohmann::json record = nlohmann::json::parse(line);
    if (event.empty() || record["event"] == event) records.push_back(record);
  }
  return records;
}

}  // namespace mxrun::testing
