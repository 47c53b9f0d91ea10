#pragma once
// Helpers for tests that run the bundled trainer as a process: a small, quick configuration and
// its --metrics_file records.

#include <dirent.h>
#include <sys/types.h>

#include <chrono>
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
  const std::vector<std::string> small{"--width",
                                       "8",
                                       "--synthetic_train",
                                       "2048",
                                       "--synthetic_test",
                                       "512",
                                       "--batch_size",
                                       "32",
                                       "--lr",
                                       "0.05",
                                       "--ckpt_dir",
                                       dir.path() + "/ckpt",
                                       "--metrics_file",
                                       dir.path() + "/metrics.jsonl"};
  command.insert(command.end(), small.begin(), small.end());
  command.insert(command.end(), extra.begin(), extra.end());
  return command;
}

// The environment overrides that make the trainer run alone, as one process, even when the test
// itself runs under a launcher: no torchrun variables at all.
inline std::map<std::string, std::string> NoLauncherEnv() {
  return {{"RANK", ""},
          {"WORLD_SIZE", ""},
          {"MASTER_PORT", ""},
          {"MASTER_ADDR", ""},
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

// Pids of `parent`'s direct children (from /proc, every thread's children file).
inline std::vector<pid_t> ChildrenOf(pid_t parent) {
  std::vector<pid_t> children;
  const std::string task_dir = "/proc/" + std::to_string(parent) + "/task";
  DIR* dir = ::opendir(task_dir.c_str());
  if (dir == nullptr) return children;
  while (dirent* entry = ::readdir(dir)) {
    if (entry->d_name[0] == '.') continue;
    std::istringstream in(ReadFile(task_dir + "/" + entry->d_name + "/children"));
    for (pid_t pid; in >> pid;) children.push_back(pid);
  }
  ::closedir(dir);
  return children;
}

inline std::string EnvOf(pid_t pid, const std::string& key) {
  const std::string environ = ReadFile("/proc/" + std::to_string(pid) + "/environ");
  std::istringstream in(environ);
  for (std::string entry; std::getline(in, entry, '\0');) {
    if (entry.rfind(key + "=", 0) == 0) return entry.substr(key.size() + 1);
  }
  return "";
}

// The launcher's worker with global rank `rank`; -1 when there is none.
inline pid_t WorkerOfRank(pid_t launcher, int rank) {
  for (pid_t child : ChildrenOf(launcher)) {
    if (EnvOf(child, "RANK") == std::to_string(rank)) return child;
  }
  return -1;
}

#if defined(PYTHON_BIN) && defined(SCRIPTS_DIR)
// scripts/check_tensorboard_events.py: the event files in `tb_dir` read by TensorBoard's own code
// (the `tensorboard` package in PYTHON_BIN's environment, .venv), the way its Scalars dashboard
// reads them, against every scalar of the run's metrics file. Exit 0 when they all match.
inline ProcessResult CheckTensorBoardEvents(const std::string& tb_dir, const TempDir& dir) {
  return Run({PYTHON_BIN, std::string(SCRIPTS_DIR) + "/check_tensorboard_events.py", tb_dir,
              dir.path() + "/metrics.jsonl"},
             {}, std::chrono::seconds(120));
}
#endif

}  // namespace mxrun::testing
