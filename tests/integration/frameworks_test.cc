// The frameworks with no code change (issue 56, item 2): a Lightning, a Hugging Face Trainer and
// an Accelerate job (tests/python/frameworks/, nothing of mxrun in them) under a real mxrun, 2
// workers, rank 1 SIGKILLed after step 17 and the job restarted from its checkpoint of step 15.
// mxrun's goodput line must count exactly the steps the framework's own log shows trained twice:
// Lightning's and the Trainer's global step (python/mxrun/_framework_progress.py) come back with
// their checkpoints, where the optimizer hook's count of their SGD would start again at 1 (17
// steps "redone"); Accelerate's AdamW keeps its own step, which the hook reads. The workers see
// the wheel's mxrun-auto-progress.pth and entry_points.txt through a site folder made here
// (tests/python/frameworks/with_site.py), as after `pip install mxrun`. And a rank that stops,
// alive, after step 17: mxrun judges the job hung from those same reports (--hang_timeout) and
// restarts it, which it cannot do for a job that reports nothing.

#include <catch2/catch.hpp>

#include <filesystem>
#include <regex>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "tests/python_workers.h"
#include "tests/subprocess.h"
#include "tests/temp_dir.h"

using namespace std::chrono_literals;
using mxrun::testing::Describe;
using mxrun::testing::ProcessResult;
using mxrun::testing::PythonWorkerEnv;
using mxrun::testing::Run;
using mxrun::testing::TempDir;
using nlohmann::json;

namespace {

const std::string kFrameworks = std::string(PYTHON_TESTS_DIR) + "/frameworks";

struct FrameworkRun {
  ProcessResult result;
  long long last_step_before_kill = -1;  // rank 0's, in the first attempt
  long long resumed_from = -1;           // the second attempt's fit_start step
};

// `job` under mxrun (2 workers, --max_restarts=1 and `flags`) with the job's `fault` flags.
FrameworkRun RunWithFault(const std::string& job, const std::vector<std::string>& flags,
                          const std::vector<std::string>& fault) {
  TempDir dir;
  const std::string ckpt = dir.path() + "/ckpt";
  std::filesystem::create_directories(ckpt);
  std::map<std::string, std::string> env = PythonWorkerEnv();
  env["MXRUN_TEST_SITE"] = mxrun::testing::MakeWheelSite(dir.path());
  FrameworkRun run;
  std::vector<std::string> argv = {MXRUN_BIN, "--standalone", "--nproc_per_node=2",
                                   "--max_restarts=1"};
  argv.insert(argv.end(), flags.begin(), flags.end());
  argv.insert(argv.end(),
              {kFrameworks + "/with_site.py", kFrameworks + "/" + job, "--ckpt_dir", ckpt});
  argv.insert(argv.end(), fault.begin(), fault.end());
  run.result = Run(argv, env, 240s);
  int attempt = 0;
  std::regex record("\\[n0 r0\\] (\\{\"event\".*\\})");
  const std::string& out = run.result.out;
  for (auto it = std::sregex_iterator(out.begin(), out.end(), record); it != std::sregex_iterator();
       ++it) {
    const json r = json::parse((*it)[1].str());
    if (r["event"] == "fit_start") {
      if (++attempt == 2) run.resumed_from = r["global_step"];
    } else if (r["event"] == "step" && attempt == 1) {
      run.last_step_before_kill = r["global_step"];
    }
  }
  return run;
}

// Rank 1 SIGKILLed after step 17.
FrameworkRun RunKilled(const std::string& job) {
  return RunWithFault(job, {}, {"--kill_rank", "1", "--kill_step", "17"});
}

// Rank 1 stops, alive, after step 17 (rank 0 then waits in the next step's all-reduce): only the
// framework's progress, read with no code change, tells mxrun that the job stopped stepping.
FrameworkRun RunHung(const std::string& job) {
  return RunWithFault(job, {"--hang_timeout=8"}, {"--hang_rank", "1", "--hang_step", "17"});
}

// The "(N steps redone)" of mxrun's goodput line; -1 when there is none.
long long StepsRedone(const std::string& err) {
  std::smatch m;
  if (!std::regex_search(err, m, std::regex("goodput [0-9.]+%: .* \\(([0-9]+) steps redone\\)"))) {
    return -1;
  }
  return std::stoll(m[1]);
}

void CheckGoodputAgainstTheLog(const FrameworkRun& run) {
  INFO(Describe(run.result));
  REQUIRE(run.result.exit_code == 0);
  REQUIRE(run.resumed_from == 15);  // its checkpoint of step 15
  REQUIRE(run.last_step_before_kill >= 16);
  CHECK(StepsRedone(run.result.err) == run.last_step_before_kill - run.resumed_from);
  CHECK_THAT(run.result.err, !Catch::Contains("no progress reports"));
  CHECK_THAT(run.result.err, Catch::Contains("first step "));  // the restart's first step seen
}

void CheckHangCaught(const FrameworkRun& run) {
  INFO(Describe(run.result));
  CHECK(std::regex_search(run.result.err,
                          std::regex("hung \\(heartbeat\\): no heartbeat for [0-9.]+ s "
                                     "\\(--hang_timeout=8\\.0 s\\)")));
  CHECK(std::regex_search(run.result.err,
                          std::regex("hang diagnostics of rank [0-9, ]+ written to")));
  // The group restarted from the checkpoint of step 15 and trained to the end.
  CheckGoodputAgainstTheLog(run);
}

}  // namespace

TEST_CASE(
    "Lightning, unchanged: mxrun's goodput counts the steps redone after a restart from "
    "last.ckpt, from the trainer's global step",
    "[integration][frameworks][python_side]") {
  const FrameworkRun run = RunKilled("lightning_job.py");
  CHECK_THAT(run.result.err, Catch::Contains("Adding 1 callbacks from entry point "
                                             "'mxrun_progress': MxrunProgress"));
  CheckGoodputAgainstTheLog(run);
}

TEST_CASE(
    "the Hugging Face Trainer, unchanged: mxrun's goodput counts the steps redone after a "
    "restart from its checkpoint, from state.global_step",
    "[integration][frameworks][python_side]") {
  CheckGoodputAgainstTheLog(RunKilled("hf_trainer_job.py"));
}

TEST_CASE(
    "Accelerate, unchanged: mxrun's goodput counts the steps redone after load_state, from "
    "the optimizer's own step",
    "[integration][frameworks][python_side]") {
  CheckGoodputAgainstTheLog(RunKilled("accelerate_job.py"));
}

TEST_CASE(
    "a framework job that stops stepping, unchanged: mxrun judges it hung from the "
    "framework's own progress and restarts it (Lightning, the Trainer, Accelerate)",
    "[integration][frameworks][hang][python_side]") {
  for (const std::string job : {"lightning_job.py", "hf_trainer_job.py", "accelerate_job.py"}) {
    INFO(job);
    CheckHangCaught(RunHung(job));
  }
}
