#pragma once
// The catalogue's jobs and what is observed of them: the bundled trainer's small job (2 workers,
// Gloo, CPU, 96 steps, a metrics record every step), its fault-free run's final state (run once
// per test process), steps trained again, and the comparison of a row's outcome with its truth.

#include <signal.h>

#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "tests/faults/catalogue.h"
#include "tests/faults/outcome.h"
#include "tests/subprocess.h"
#include "tests/temp_dir.h"
#include "tests/trainer_runs.h"

namespace mxrun::faults {

// `mxrun --standalone --nproc_per_node=2 MXRUN_FLAGS train` on the catalogue's small run in `dir`,
// then `trainer_flags` (none that changes what is computed).
inline std::vector<std::string> TrainerJob(const testing::TempDir& dir,
                                           std::vector<std::string> mxrun_flags,
                                           std::vector<std::string> trainer_flags = {}) {
  std::vector<std::string> argv{MXRUN_BIN, "--standalone", "--nproc_per_node=2"};
  argv.insert(argv.end(), mxrun_flags.begin(), mxrun_flags.end());
  argv.push_back("train");
  std::vector<std::string> run{"--epochs",     "3", "--log_every", "1",
                               "--ckpt_every", "4", "--no_eval"};
  run.insert(run.end(), trainer_flags.begin(), trainer_flags.end());
  return testing::SmallRun(argv, dir, run);
}

// The fault-free job's final state digest ("done" record's state_sha256), run once.
inline const std::string& FaultFreeDigest() {
  static const std::string digest = [] {
    testing::TempDir dir;
    testing::ProcessResult r = testing::Run(TrainerJob(dir, {}), {}, std::chrono::seconds(240));
    const auto done = testing::Metrics(dir, "done");
    if (r.exit_code != 0 || done.size() != 1 || !done[0].contains("state_sha256")) {
      return std::string("(the fault-free run failed: ") + testing::Describe(r) + ")";
    }
    return done[0]["state_sha256"].get<std::string>();
  }();
  return digest;
}

// Completed steps trained again, from a --metrics_file: step numbers logged twice, or what the
// trainer's recovery records count from its progress marker (a step completed but killed before
// its record), the larger.
inline int StepsLostIn(const std::string& metrics_file) {
  std::set<int> seen;
  int twice = 0;
  int redone = 0;
  std::istringstream records(testing::ReadFile(metrics_file));
  for (std::string line; std::getline(records, line);) {
    if (line.empty()) continue;
    const nlohmann::json record = nlohmann::json::parse(line);
    if (record["event"] == "step" && !seen.insert(record["step"].get<int>()).second) ++twice;
    if (record["event"] == "recovery") redone += record["steps_redone"].get<int>();
  }
  return std::max(twice, redone);
}

inline int StepsLost(const testing::TempDir& dir) {
  return StepsLostIn(dir.path() + "/metrics.jsonl");
}

// Whether the job in `dir` ended with the fault-free run's state (nullopt: it did not end).
inline std::optional<bool> SameState(const testing::TempDir& dir) {
  const auto done = testing::Metrics(dir, "done");
  if (done.size() != 1 || !done[0].contains("state_sha256")) return std::nullopt;
  return done[0]["state_sha256"].get<std::string>() == FaultFreeDigest();
}

// The outcome of a finished job: its console read, its exit code.
inline Outcome Observe(const testing::ProcessResult& r) {
  Outcome outcome = ReadConsole(r.err);
  outcome.exit_code = r.exit_code;
  return outcome;
}

// The same, with the trainer's steps lost and final state.
inline Outcome ObserveTrainer(const testing::ProcessResult& r, const testing::TempDir& dir) {
  Outcome outcome = Observe(r);
  outcome.steps_lost = StepsLost(dir);
  outcome.same_state = SameState(dir);
  return outcome;
}

// The row, or a failed test when the catalogue has no such id.
inline const Fault& Row(std::string_view id) {
  const Fault* fault = FindFault(id);
  if (fault == nullptr) throw std::runtime_error("no fault catalogue row " + std::string(id));
  return *fault;
}

}  // namespace mxrun::faults
