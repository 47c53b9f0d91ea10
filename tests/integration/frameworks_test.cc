// The frameworks with no code change (issue 56, item 2): a Lightning, a Hugging Face Trainer and
// an Accelerate job (tests/python/frameworks/, nothing of mxrun in them) under a real mxrun, 2
// workers, rank 1 SIGKILLed after step 17 and the job restarted from its checkpoint of step 15.
// mxrun's goodput line must count exactly the steps the framework's own log shows trained twice:
// Lightning's and the Trainer's global step (python/mxrun/_framework_progress.py) come back with
// their checkpoints, where the optimizer hook's count of their SGD would start again at 1 (17
// steps "redone"); Accelerate's AdamW keeps its own step, which the hook reads. The workers see
// the wheel's mxrun-auto-progress.pth and entry_points.txt through a site folder made here
// (tests/python/frameworks/with_site.py), as after `pip install mxrun`.

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
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

void Copy(const std::string& from, const std::string& to) {
  std::ifstream in(from, std::ios::binary);
  REQUIRE(in.good());
  std::ofstream(to, std::ios::binary) << in.rdbuf();
}

// A site folder as the wheel leaves one: the .pth, and a dist-info with the entry points.
std::string MakeSite(const TempDir& dir) {
  const std::string site = dir.path() + "/site";
  const std::string info = site + "/mxrun_test-0.dist-info";
  std::filesystem::create_directories(info);
  Copy(std::string(PYTHON_MODULE_DIR) + "/mxrun-auto-progress.pth",
       site + "/mxrun-auto-progress.pth");
  Copy(std::string(PYTHON_MODULE_DIR) + "/entry_points.txt", info + "/entry_points.txt");
  std::ofstream(info + "/METADATA") << "Metadata-Version: 2.1\nName: mxrun-test\nVersion: 0\n";
  return site;
}

struct FrameworkRun {
  ProcessResult result;
  long long last_step_before_kill = -1;  // rank 0's, in the first attempt
  long long resumed_from = -1;           // the second attempt's fit_start step
};

FrameworkRun RunKilled(const std::string& job) {
  TempDir dir;
  const std::string ckpt = dir.path() + "/ckpt";
  std::filesystem::create_directories(ckpt);
  std::map<std::string, std::string> env = PythonWorkerEnv();
  env["MXRUN_TEST_SITE"] = MakeSite(dir);
  FrameworkRun run;
  run.result = Run({MXRUN_BIN, "--standalone", "--nproc_per_node=2", "--max_restarts=1",
                    kFrameworks + "/with_site.py", kFrameworks + "/" + job, "--ckpt_dir", ckpt,
                    "--kill_rank", "1", "--kill_step", "17"},
                   env, 240s);
  int attempt = 0;
  std::regex record("\\[n0 r0\\] (\\{\"event\".*\\})");
  const std::string& out = run.result.out;
  for (auto it = std::sregex_iterator(out.begin(), out.end(), record);
       it != std::sregex_iterator(); ++it) {
    const json r = json::parse((*it)[1].str());
    if (r["event"] == "fit_start") {
      if (++attempt == 2) run.resumed_from = r["global_step"];
    } else if (r["event"] == "step" && attempt == 1) {
      run.last_step_before_kill = r["global_step"];
    }
  }
  return run;
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

}  // namespace

TEST_CASE("Lightning, unchanged: mxrun's goodput counts the steps redone after a restart from "
          "last.ckpt, from the trainer's global step",
          "[integration][frameworks]") {
  const FrameworkRun run = RunKilled("lightning_job.py");
  CHECK_THAT(run.result.err, Catch::Contains("Adding 1 callbacks from entry point "
                                             "'mxrun_progress': MxrunProgress"));
  CheckGoodputAgainstTheLog(run);
}

TEST_CASE("the Hugging Face Trainer, unchanged: mxrun's goodput counts the steps redone after a "
          "restart from its checkpoint, from state.global_step",
          "[integration][frameworks]") {
  CheckGoodputAgainstTheLog(RunKilled("hf_trainer_job.py"));
}

TEST_CASE("Accelerate, unchanged: mxrun's goodput counts the steps redone after load_state, from "
          "the optimizer's own step",
          "[integration][frameworks]") {
  CheckGoodputAgainstTheLog(RunKilled("accelerate_job.py"));
}
