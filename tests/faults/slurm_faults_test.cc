// The fault catalogue's Slurm rows (tests/faults/catalogue.h): scancel and requeue of a real batch
// job on the tests' own Slurm (tests/slurm_cluster.h), compared with their ground truth. Built
// into mxrun_slurm_tests, whose harness gives each run the PID namespace Slurm's job processes
// need to be accounted for.

#include <catch2/catch.hpp>

#include <unistd.h>

#include <algorithm>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "nlohmann/json.hpp"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "tests/faults/catalogue.h"
#include "tests/faults/catalogue_job.h"
#include "tests/faults/outcome.h"
#include "tests/slurm/slurm_jobs.h"
#include "tests/slurm_cluster.h"
#include "tests/subprocess.h"

using namespace std::chrono_literals;
using mxrun::faults::FindFault;
using mxrun::faults::Mismatch;
using mxrun::faults::Outcome;
using mxrun::faults::ReadConsole;
using mxrun::testing::ReadFile;
using mxrun::testing::Run;
using mxrun::testing::SlurmCluster;
using mxrun::testing::Submit;
using mxrun::testing::WaitForLines;

namespace {

const std::string kMxrun = MXRUN_BIN;

// The exit code a node's mxrun said it ended with ("...; exit code 143"), -1 if it said none.
int SaidExitCode(const std::string& log) {
  const std::string marker = "; exit code ";
  const size_t at = log.rfind(marker);
  int code = -1;
  if (at == std::string::npos ||
      !absl::SimpleAtoi(
          log.substr(at + marker.size(),
                     log.find_first_not_of("0123456789", at + marker.size()) - at - marker.size()),
          &code)) {
    return -1;
  }
  return code;
}

}  // namespace

TEST_CASE("fault 25 slurm-scancel: the job cancelled by Slurm (scancel)", "[faults]") {
  SlurmCluster cluster;
  const std::string id =
      Submit(cluster, "cancel",
             "srun --output=" + cluster.jobs() + "/cancel-node%n.log " + kMxrun +
                 " --nproc_per_node=2 --no_python " + TEST_CHILD_BIN + " --ready --sleep=300");
  const std::vector<std::string> logs{cluster.jobs() + "/cancel-node0.log",
                                      cluster.jobs() + "/cancel-node1.log"};
  for (const std::string& log : logs) REQUIRE(WaitForLines(log, "ready rank", 2));
  REQUIRE(Run({"scancel", id}, {}, 30s).exit_code == 0);
  CHECK(cluster.WaitForJobState(id, {"CANCELLED"}) == "CANCELLED");
  for (const std::string& path : logs) {
    REQUIRE(WaitForLines(path, "cancelled by SIGTERM", 1, 30s));
    const std::string log = ReadFile(path);
    INFO(path << ":\n" << log);
    Outcome outcome = ReadConsole(log);
    outcome.exit_code = SaidExitCode(log);
    CHECK(Mismatch(*FindFault("slurm-scancel"), outcome) == "");
  }
  // Nothing of the job is left: no worker, no mxrun, no slurmstepd.
  CHECK(cluster.WaitForNoStrays(std::chrono::seconds(2 * SlurmCluster::kKillWaitSeconds + 10))
            .empty());
}

#ifdef MXRUN_SLURM_TRAINER_TESTS
TEST_CASE("fault 26 slurm-requeue: the job requeued by Slurm mid-run (preemption with requeue)",
          "[faults]") {
  SlurmCluster cluster;
  // The bundled trainer on both nodes, a checkpoint every 4 steps; the same job once without the
  // requeue, for the final state.
  auto job = [&](const std::string& name) {
    return absl::StrCat("srun ", kMxrun,
                        " train --model resnet18 --width 8 --epochs 4 --synthetic_train 512 "
                        "--synthetic_test 32 --batch_size 32 --threads 1 --log_every 1 "
                        "--ckpt_every 4 --no_eval --resume --ckpt_dir ",
                        cluster.jobs(), "/", name, "-ckpt --metrics_file ", cluster.jobs(), "/",
                        name, ".jsonl");
  };
  const std::string twin = Submit(cluster, "twin", job("twin"));
  const std::string twin_state =
      cluster.WaitForJobState(twin, {"COMPLETED", "FAILED", "CANCELLED"}, 300s);
  INFO("the twin job's output:\n" << ReadFile(cluster.jobs() + "/twin.out"));
  REQUIRE(twin_state == "COMPLETED");
  const std::string id =
      Submit(cluster, "requeue", job("requeue"), {"--requeue", "--open-mode=append"});
  const std::string ckpt = cluster.jobs() + "/requeue-ckpt/checkpoint.pt";
  const auto deadline = std::chrono::steady_clock::now() + 180s;
  while (access(ckpt.c_str(), F_OK) != 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(50ms);
  }
  {
    INFO("the job's output so far:\n" << ReadFile(cluster.jobs() + "/requeue.out"));
    REQUIRE(access(ckpt.c_str(), F_OK) == 0);
  }
  REQUIRE(Run({"scontrol", "requeue", id}, {}, 30s).exit_code == 0);
  CHECK(cluster.WaitForJobState(id, {"PENDING"}) == "PENDING");
  // Not within the requeue's second: see "a requeued job resumes from its checkpoint".
  Run({"scontrol", "update", "JobId=" + id, "StartTime=now+1"}, {}, 30s);
  const std::string state = cluster.WaitForJobState(id, {"COMPLETED", "FAILED", "CANCELLED"}, 300s);
  const std::string log = ReadFile(cluster.jobs() + "/requeue.out");
  INFO(log);
  Outcome outcome = ReadConsole(log);
  outcome.exit_code = state == "COMPLETED" ? 0 : 1;
  int restarts = -1;
  CHECK(absl::SimpleAtoi(cluster.JobField(id, "Restarts"), &restarts));
  outcome.restarts = restarts;
  outcome.recovery = mxrun::faults::Recovery::kRequeued;
  outcome.steps_lost = mxrun::faults::StepsLostIn(cluster.jobs() + "/requeue.jsonl");
  std::string done_digest;
  std::istringstream records(ReadFile(cluster.jobs() + "/requeue.jsonl"));
  for (std::string line; std::getline(records, line);) {
    const nlohmann::json record = nlohmann::json::parse(line);
    if (record["event"] == "done") done_digest = record["state_sha256"];
  }
  std::string twin_digest;
  std::istringstream twin_records(ReadFile(cluster.jobs() + "/twin.jsonl"));
  for (std::string line; std::getline(twin_records, line);) {
    const nlohmann::json record = nlohmann::json::parse(line);
    if (record["event"] == "done") twin_digest = record["state_sha256"];
  }
  REQUIRE(twin_digest.size() == 64);
  if (!done_digest.empty()) outcome.same_state = done_digest == twin_digest;
  CHECK(Mismatch(*FindFault("slurm-requeue"), outcome) == "");
}
#endif  // MXRUN_SLURM_TRAINER_TESTS
