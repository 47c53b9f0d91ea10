// The mxrun Python module (python/mxrun) under a real mxrun, with real Python workers: one
// mxrun.step_done per step feeds the agent's goodput and metrics, and counts as the heartbeat that
// --hang_timeout judges; under torchrun the same script runs unchanged. The module's own unit
// tests are tests/python/test_mxrun_module.py.

#include <catch2/catch.hpp>

#include <regex>

#include "tests/metrics_client.h"
#include "tests/python_workers.h"
#include "tests/subprocess.h"

using namespace std::chrono_literals;
using mxrun::testing::AgentMetricsEndpoint;
using mxrun::testing::CountOccurrences;
using mxrun::testing::Describe;
using mxrun::testing::ProcessResult;
using mxrun::testing::PythonWorkerEnv;
using mxrun::testing::Run;
using mxrun::testing::Subprocess;

namespace {

const std::string kWorker = std::string(PYTHON_TESTS_DIR) + "/progress_worker.py";

std::vector<std::string> MxrunWorker(std::vector<std::string> flags,
                                     const std::vector<std::string>& worker_args) {
  std::vector<std::string> argv{MXRUN_BIN, "--standalone"};
  argv.insert(argv.end(), flags.begin(), flags.end());
  argv.push_back(kWorker);
  argv.insert(argv.end(), worker_args.begin(), worker_args.end());
  return argv;
}

}  // namespace

TEST_CASE(
    "a Python script's mxrun.step_done reaches the agent: each rank's step in the metrics, "
    "the steps in the goodput line",
    "[integration][python_module]") {
  Subprocess job(MxrunWorker({"--nproc_per_node=2", "--metrics_port=0"}, {"60", "0.05"}),
                 PythonWorkerEnv());
  const std::string endpoint = AgentMetricsEndpoint(job);
  REQUIRE(job.WaitForStdout("step 1 rank", 2, 60s));
  const std::string page = mxrun::testing::PageWithSamples(endpoint, "mxrun_worker_step", 2);
  INFO(page);
  CHECK(CountOccurrences(page, "mxrun_worker_step{") == 2);
  ProcessResult r = job.Wait(60s);
  INFO(Describe(r));
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.err, Catch::Contains("goodput "));
  CHECK_THAT(r.err, !Catch::Contains("no progress reports"));
  CHECK_THAT(r.err, !Catch::Contains("MXRUN_CONTROL_FD"));  // the module took its channel
}

TEST_CASE("mxrun.step_done is the heartbeat of --hang_timeout", "[integration][python_module]") {
  SECTION("steps every 0.1 s for 3 s: never hung with a 1 s timeout") {
    ProcessResult r = Run(MxrunWorker({"--nproc_per_node=1", "--hang_timeout=1"}, {"30", "0.1"}),
                          PythonWorkerEnv(), 60s);
    INFO(Describe(r));
    CHECK(r.exit_code == 0);
    CHECK_THAT(r.err, !Catch::Contains("hung"));
  }
  SECTION("steps stop: hung after the timeout, without any heartbeat file") {
    ProcessResult r =
        Run(MxrunWorker({"--nproc_per_node=1", "--hang_timeout=1"}, {"5", "0.1", "60"}),
            PythonWorkerEnv(), 40s);
    INFO(Describe(r));
    CHECK(r.exit_code == 1);
    CHECK(std::regex_search(r.err, std::regex("exit       : hung \\(heartbeat\\): no heartbeat for "
                                              "1\\.[0-9] s \\(--hang_timeout=1\\.0 s\\)")));
  }
}

TEST_CASE(
    "a Python job's goodput from mxrun.step_done: its setup is startup, the steps trained "
    "again after a failure are lost work",
    "[integration][python_module]") {
  mxrun::testing::TempDir ckpt;
  ProcessResult r =
      Run({MXRUN_BIN, "--standalone", "--nproc_per_node=2", "--max_restarts=1",
           std::string(PYTHON_TESTS_DIR) + "/checkpoint_worker.py", ckpt.path(), "24", "1.0"},
          PythonWorkerEnv(), 120s);
  INFO(Describe(r));
  REQUIRE(r.exit_code == 0);
  CHECK(CountOccurrences(r.out, "resumed from 10") == 2);  // the restarted group
  // Steps 11 to 14 were reported before the failure and trained again after it.
  std::smatch m;
  REQUIRE(std::regex_search(
      r.err, m,
      std::regex("goodput [0-9.]+%: ([0-9.]+) s wall, ([0-9.]+) s training, [0-9.]+ s rendezvous, "
                 "([0-9.]+) s startup, ([0-9.]+) s restarts, ([0-9.]+) s lost work \\(4 steps "
                 "redone\\)")));
  // Against the workers' own clocks: start-up holds their 1 s setup (and a Python's start, well
  // under 2 s here), a restart holds the new process's setup too, the lost work is the 4 steps
  // at their 0.05 s (and some, on a busy machine).
  const double startup = std::stod(m[3]), restarts = std::stod(m[4]), lost = std::stod(m[5]);
  CHECK(startup >= 1.0);
  CHECK(startup < 3.0);
  CHECK(restarts >= 1.0);
  CHECK(lost >= 0.1);
  CHECK(lost < 1.5);
  CHECK_THAT(r.err, !Catch::Contains("no progress reports"));
}

TEST_CASE("a script that calls mxrun.step_done runs unchanged under torchrun",
          "[integration][python_module][python_side]") {
  std::map<std::string, std::string> env = PythonWorkerEnv();
  env["TORCH_DISABLE_SHARE_RDZV_TCP_STORE"] = "1";
  ProcessResult r =
      Run({TORCHRUN_BIN, "--standalone", "--nproc_per_node=2", kWorker, "20", "0.01"}, env, 120s);
  INFO(Describe(r));
  CHECK(r.exit_code == 0);
  CHECK(CountOccurrences(r.out, "step 20 rank") == 2);
  CHECK_THAT(r.err, !Catch::Contains("mxrun:"));  // not a word from the module
}
