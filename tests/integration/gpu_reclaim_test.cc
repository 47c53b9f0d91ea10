// GPU memory reclaimed before a respawn (issue 27, item 3), with tests/fake_nvml.cc standing in
// for the driver: the test plays NVML's part through FAKE_NVML_STATE, showing the dead worker's
// pid holding 9000 MiB on the GPU and later letting it go. The agent must not start the next
// attempt's worker before the release, must say what it waited for, and when the memory is never
// released must name who holds it (here a process of the test's own, not a worker) and go on.

#include <signal.h>
#include <unistd.h>

#include <fstream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "tests/fake_nvml.h"
#include "tests/subprocess.h"
#include "tests/temp_dir.h"

using mxrun::testing::CountOccurrences;
using mxrun::testing::IntsAfter;
using mxrun::testing::ProcessResult;
using mxrun::testing::Subprocess;
using namespace std::chrono_literals;

namespace {

std::map<std::string, std::string> FakeGpu(const std::string& state) {
  return {{"LD_LIBRARY_PATH", mxrun::testing::FakeNvmlLibraryPath()},
          {"FAKE_NVML_DEVICES", "GPU-aaaa@0000:00:03.0"},
          {"FAKE_NVML_STATE", state}};
}

void WriteState(const std::string& path, const std::string& line) {
  std::ofstream(path + ".new") << line << "\n";
  std::rename((path + ".new").c_str(), path.c_str());  // whole, never half-written
}

// One worker on GPU 0 that says "ready pid=<its pid> attempt=<N>", fails in its first attempt
// after 1 s (time for the test to show it holding the GPU) and succeeds in its second.
std::vector<std::string> Job(std::vector<std::string> flags) {
  std::vector<std::string> argv{MXRUN_BIN, "--standalone", "--nproc_per_node=1", "--max_restarts=1",
                                "--gpu_reclaim_interval=0.1"};
  argv.insert(argv.end(), flags.begin(), flags.end());
  argv.insert(argv.end(),
              {"--no_python", "sh", "-c",
               "echo \"ready rank=0 pid=$$ attempt=$TORCHELASTIC_RESTART_COUNT\"; sleep 1; "
               "[ \"$TORCHELASTIC_RESTART_COUNT\" = 0 ] && exit 3; exit 0"});
  return argv;
}

}  // namespace

TEST_CASE("the next attempt's worker starts only once the dead worker's GPU memory is released",
          "[gpu_reclaim]") {
  mxrun::testing::TempDir dir;
  const std::string state = dir.path() + "/nvml";
  WriteState(state, "GPU-aaaa used_mib=100 pids=");
  Subprocess job(Job({"--gpu_reclaim_timeout=60"}), FakeGpu(state));
  REQUIRE(job.WaitForStdout("ready rank=0", 1, 30s));
  const std::vector<int> pids = IntsAfter(job.out(), " pid");
  REQUIRE(pids.size() == 1);
  // The worker holds 9000 MiB, as NVML would say; then it fails.
  WriteState(state, "GPU-aaaa used_mib=9000 pids=" + std::to_string(pids[0]) + ":9000");
  REQUIRE(job.WaitForStderr("failed: exit code 3", 1, 30s));
  usleep(1'500'000);                                     // the agent polls meanwhile
  CHECK(CountOccurrences(job.out(), "attempt=1") == 0);  // not started on a full GPU
  WriteState(state, "GPU-aaaa used_mib=200 pids=");
  ProcessResult r = job.Wait(30s);
  INFO(r.out << r.err);
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("attempt=1"));
  CHECK_THAT(r.err, Catch::Contains("GPU memory released after "));
  CHECK_THAT(r.err, Catch::Contains("(it was GPU 0: 9000 MiB used, held by pid " +
                                    std::to_string(pids[0]) +
                                    " (rank 0's worker, gone) with "
                                    "9000 MiB)"));
}

TEST_CASE(
    "GPU memory never released: the holder is named and the job goes on, and off or without "
    "a GPU nothing is waited for",
    "[gpu_reclaim]") {
  mxrun::testing::TempDir dir;
  const std::string state = dir.path() + "/nvml";
  // A stranger (a process of the test's, not a worker) and the dead worker share the GPU.
  Subprocess stranger({"sleep", "60"});
  WriteState(state, "GPU-aaaa used_mib=100 pids=");
  Subprocess job(Job({"--gpu_reclaim_timeout=1"}), FakeGpu(state));
  REQUIRE(job.WaitForStdout("ready rank=0", 1, 30s));
  const int worker = IntsAfter(job.out(), " pid").at(0);
  WriteState(state, "GPU-aaaa used_mib=9000 pids=" + std::to_string(worker) + ":8000," +
                        std::to_string(stranger.pid()) + ":1000");
  ProcessResult r = job.Wait(30s);
  INFO(r.out << r.err);
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.err, Catch::Contains("GPU memory still held after "));
  CHECK_THAT(r.err, Catch::Contains("pid " + std::to_string(worker) + " (rank 0's worker, gone)"));
  CHECK_THAT(r.err, Catch::Contains("pid " + std::to_string(stranger.pid()) +
                                    " (not a worker of this job, state S: alive) with 1000 MiB"));
  CHECK_THAT(r.err, Catch::Contains("starting the workers anyway"));
  kill(stranger.pid(), SIGKILL);
  stranger.Wait(10s);

  // --gpu_reclaim_timeout=0: no wait at all; without NVML (no fake library): none either.
  for (const auto& [flags, env] :
       std::vector<std::pair<std::vector<std::string>, std::map<std::string, std::string>>>{
           {{"--gpu_reclaim_timeout=0"}, FakeGpu(state)}, {{}, {}}}) {
    WriteState(state, "GPU-aaaa used_mib=9000 pids=1:9000");
    ProcessResult quick = mxrun::testing::Run(Job(flags), env, 30s);
    INFO(quick.out << quick.err);
    CHECK(quick.exit_code == 0);
    CHECK_THAT(quick.err, !Catch::Contains("GPU memory"));
  }
}
