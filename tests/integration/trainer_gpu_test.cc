// The bundled trainer on a CUDA GPU (label gpu: scripts/test.sh skips these where nvidia-smi finds
// no GPU). One GPU is enough: NCCL will not put two ranks on one device, so these run one worker,
// and name --backend nccl where NCCL must be reached (a one-rank group, as DDP's at world size 1).
//
// Built with the whole project (the launcher is mxrun) and by scripts/gpu/build-trainer-cuda.sh on
// a GPU machine that has PyTorch but not mxrun's dependencies (the launcher is that PyTorch's
// torchrun). TRAIN_BIN, and MXRUN_BIN or TORCHRUN_PYTHON, are set by CMake.

#include <catch2/catch.hpp>

#include <cmath>

#include "nlohmann/json.hpp"
#include "tests/subprocess.h"
#include "tests/trainer_runs.h"

using namespace std::chrono_literals;
using mxrun::testing::Describe;
using mxrun::testing::Metrics;
using mxrun::testing::NoLauncherEnv;
using mxrun::testing::ProcessResult;
using mxrun::testing::Run;
using mxrun::testing::SmallRun;
using mxrun::testing::TempDir;
using nlohmann::json;

namespace {

// argv that starts the trainer as the one worker of a one-node job.
std::vector<std::string> UnderLauncher() {
#if defined(MXRUN_BIN)
  return {MXRUN_BIN, "--standalone", "--nproc_per_node=1", "train"};
#else
  return {TORCHRUN_PYTHON, "-m",     "torch.distributed.run", "--standalone", "--nproc_per_node=1",
          "--no_python",   TRAIN_BIN};
#endif
}

}  // namespace

TEST_CASE("train runs on a GPU with bf16 autocast and channels-last", "[gpu]") {
  TempDir dir;
  std::vector<std::string> argv =
      SmallRun({TRAIN_BIN}, dir,
               {"--device", "cuda", "--amp", "bf16", "--channels_last", "--epochs", "1",
                "--max_steps", "8", "--log_every", "4", "--ckpt_every", "4"});
  ProcessResult r = Run(argv, NoLauncherEnv(), 300s);
  INFO(Describe(r));
  REQUIRE(r.exit_code == 0);
  const json start = Metrics(dir, "start").at(0);
  CHECK(start["device"].get<std::string>().rfind("cuda", 0) == 0);
  CHECK(start["backend"] == "none");  // alone, with no backend named: nothing to reduce
  for (const json& step : Metrics(dir, "step")) CHECK(std::isfinite(step["loss"].get<double>()));
  CHECK(Metrics(dir, "done").at(0)["step"] == 8);
  // Rank 0 reports its peak GPU memory, as torch.cuda.max_memory_allocated does.
  const json memory = Metrics(dir, "memory").at(0);
  CHECK(memory["max_allocated_mib"].get<double>() > 0);
  CHECK(memory["max_reserved_mib"].get<double>() >= memory["max_allocated_mib"].get<double>());
}

TEST_CASE("fp16 training with loss scaling over NCCL resumes on the GPU", "[gpu]") {
  TempDir dir;
  std::vector<std::string> argv =
      SmallRun(UnderLauncher(), dir,
               {"--device", "cuda", "--backend", "nccl", "--amp", "fp16", "--epochs", "1",
                "--max_steps", "6", "--log_every", "2", "--ckpt_every", "3"});
  ProcessResult first = Run(argv, {}, 300s);
  INFO(Describe(first));
  REQUIRE(first.exit_code == 0);
  CHECK(Metrics(dir, "start").at(0)["backend"] == "nccl");
  argv.push_back("--resume");
  argv.push_back("--max_steps");
  argv.push_back("9");
  ProcessResult second = Run(argv, {}, 300s);
  INFO(Describe(second));
  REQUIRE(second.exit_code == 0);
  auto resumes = Metrics(dir, "resume");
  REQUIRE(resumes.size() == 1);
  CHECK(resumes[0]["step"] == 6);
  CHECK(Metrics(dir, "done").at(Metrics(dir, "done").size() - 1)["step"] == 9);
  for (const json& step : Metrics(dir, "step")) CHECK(std::isfinite(step["loss"].get<double>()));
}
