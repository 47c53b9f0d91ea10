// Stragglers of unchanged scripts under synchronous data parallel (issue 56, item 2): every rank's
// step lasts as long as the slowest rank's, because DDP's all-reduce waits for it, so step times
// name nobody. The mxrun module times each rank's own work per step with no code change
// (python/mxrun/_busy_time.py: input and forward, no collective), and mxrun names the rank whose
// own work is slow. The jobs in tests/python/frameworks/ (a plain DDP script, Lightning, the
// Hugging Face Trainer, Accelerate: nothing of mxrun in them) run on real Gloo groups with rank 1
// 3x slower (--slow_rank); one node judges on its agent, two nodes on the master.

#include <catch2/catch.hpp>

#include <memory>
#include <regex>
#include <string>
#include <vector>

#include "tests/master.h"
#include "tests/python_workers.h"
#include "tests/subprocess.h"
#include "tests/temp_dir.h"

using namespace std::chrono_literals;
using mxrun::testing::Describe;
using mxrun::testing::Master;
using mxrun::testing::ProcessResult;
using mxrun::testing::PythonWorkerEnv;
using mxrun::testing::Run;
using mxrun::testing::Subprocess;
using mxrun::testing::TempDir;

namespace {

const std::string kFrameworks = std::string(PYTHON_TESTS_DIR) + "/frameworks";

// The job's arguments: 40 steps of 50 ms of the rank's own work, 150 ms on rank 1.
std::vector<std::string> JobArgv(const std::string& job, const std::string& ckpt) {
  return {kFrameworks + "/with_site.py",
          kFrameworks + "/" + job,
          "--ckpt_dir",
          ckpt,
          "--steps",
          "40",
          "--ckpt_every",
          "1000",
          "--slow_rank",
          "1"};
}

std::map<std::string, std::string> JobEnv(const TempDir& dir) {
  std::map<std::string, std::string> env = PythonWorkerEnv();
  env["MXRUN_TEST_SITE"] = mxrun::testing::MakeWheelSite(dir.path());
  return env;
}

const char* const kFlags[] = {"--straggler_steps=8", "--straggler_factor=1.5"};

// Rank 1 named, by its own work, and no other rank.
void CheckRankOneNamed(const std::string& log) {
  CHECK(std::regex_search(log, std::regex("rank 1 is a straggler: [0-9.]+ s of its own work "
                                          "\\(input and forward\\) a step, [0-9.]+x the other "
                                          "ranks' median")));
  CHECK_THAT(log, !Catch::Contains("rank 0 is a straggler"));
  CHECK_THAT(log, !Catch::Contains("rank 2 is a straggler"));
  CHECK_THAT(log, !Catch::Contains("rank 3 is a straggler"));
}

ProcessResult RunOneNode(const std::string& job,
                         std::map<std::string, std::string> extra_env = {}) {
  TempDir dir;
  std::map<std::string, std::string> env = JobEnv(dir);
  env.insert(extra_env.begin(), extra_env.end());
  std::vector<std::string> argv = {MXRUN_BIN, "--standalone", "--nproc_per_node=2", kFlags[0],
                                   kFlags[1]};
  for (const std::string& a : JobArgv(job, dir.path())) argv.push_back(a);
  return Run(argv, env, 240s);
}

}  // namespace

TEST_CASE(
    "a plain DDP script, unchanged: the rank whose own work is slow is named a straggler, "
    "though every rank's step takes as long",
    "[integration][straggler][frameworks]") {
  const ProcessResult result = RunOneNode("plain_ddp_job.py");
  INFO(Describe(result));
  REQUIRE(result.exit_code == 0);
  CheckRankOneNamed(result.err);

  // Without the module's measure (MXRUN_AUTO_PROGRESS=0 turns the hooks off: the script reports
  // nothing) nobody is named: the same job, the same slow rank.
  const ProcessResult silent = RunOneNode("plain_ddp_job.py", {{"MXRUN_AUTO_PROGRESS", "0"}});
  INFO(Describe(silent));
  REQUIRE(silent.exit_code == 0);
  CHECK_THAT(silent.err, !Catch::Contains("is a straggler"));
}

TEST_CASE(
    "a plain DDP script on two nodes, unchanged: the master names the rank whose own work "
    "is slow from the agents' heartbeats",
    "[integration][straggler][frameworks]") {
  Master master;
  TempDir dir;
  const std::map<std::string, std::string> env = JobEnv(dir);
  std::vector<std::unique_ptr<Subprocess>> nodes;
  for (int node = 0; node < 2; ++node) {
    std::vector<std::string> argv = {MXRUN_BIN,
                                     "--rdzv_backend=c10d",
                                     "--rdzv_endpoint=" + master.endpoint(),
                                     "--rdzv_id=busy",
                                     "--nnodes=2",
                                     "--nproc_per_node=1",
                                     "--rdzv_conf=is_host=0",
                                     kFlags[0],
                                     kFlags[1]};
    for (const std::string& a : JobArgv("plain_ddp_job.py", dir.path())) argv.push_back(a);
    nodes.push_back(std::make_unique<Subprocess>(argv, env));
  }
  std::string logs;
  for (auto& node : nodes) {
    const ProcessResult result = node->Wait(240s);
    INFO(Describe(result));
    CHECK(result.exit_code == 0);
    logs += result.err;
  }
  INFO(logs);
  CheckRankOneNamed(logs);
  CHECK_THAT(master.StopAndOutput(), Catch::Contains("rank 1 is a straggler"));
}

TEST_CASE(
    "Lightning, the Trainer and Accelerate, unchanged: the rank whose own work is slow is "
    "named a straggler",
    "[integration][straggler][frameworks][python_side]") {
  for (const std::string job : {"lightning_job.py", "hf_trainer_job.py", "accelerate_job.py"}) {
    INFO(job);
    const ProcessResult result = RunOneNode(job);
    INFO(Describe(result));
    REQUIRE(result.exit_code == 0);
    CheckRankOneNamed(result.err);
  }
}
