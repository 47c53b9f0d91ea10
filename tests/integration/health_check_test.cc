// Node health checks (issue 27, item 1) on real processes: an unhealthy node does not join, says
// why in one line, exits 93 (do not requeue), and the master's status lists it. The GPU checks go
// through tests/fake_nvml.cc (retired pages, row remaps, free memory from FAKE_NVML_STATE).

#include <signal.h>
#include <unistd.h>

#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "tests/fake_nvml.h"
#include "tests/master.h"
#include "tests/subprocess.h"
#include "tests/temp_dir.h"

using mxrun::testing::CountOccurrences;
using mxrun::testing::Master;
using mxrun::testing::ProcessResult;
using mxrun::testing::Subprocess;
using namespace std::chrono_literals;

namespace {

ProcessResult OneNode(std::vector<std::string> flags, std::map<std::string, std::string> env = {}) {
  std::vector<std::string> argv{MXRUN_BIN, "--standalone", "--nproc_per_node=2"};
  argv.insert(argv.end(), flags.begin(), flags.end());
  argv.insert(argv.end(), {"--no_python", TEST_CHILD_BIN, "--ready"});
  return mxrun::testing::Run(argv, env, 60s);
}

// The fake NVML's state, replaced whole (it is read again at every call).
void WriteState(const std::string& path, const std::string& text) {
  std::ofstream(path + ".new") << text;
  std::rename((path + ".new").c_str(), path.c_str());
}

std::map<std::string, std::string> FakeGpus(const std::string& state) {
  return {{"LD_LIBRARY_PATH", mxrun::testing::FakeNvmlLibraryPath()},
          {"FAKE_NVML_DEVICES", "GPU-aaaa@0000:00:03.0,GPU-bbbb@0000:00:04.0"},
          {"FAKE_NVML_STATE", state}};
}

}  // namespace

TEST_CASE("a failing --health_check keeps the node out: one line, exit 93, no worker started",
          "[health]") {
  ProcessResult r = OneNode({"--health_check", "echo 'ECC errors on mlx5_0'; exit 1"});
  INFO(r.out << r.err);
  CHECK(r.exit_code == 93);
  CHECK(CountOccurrences(r.err, "this node is unhealthy") == 1);
  CHECK_THAT(r.err, Catch::Contains("this node is unhealthy: --health_check 'echo 'ECC errors on "
                                    "mlx5_0'; exit 1' exited 1: ECC errors on mlx5_0; it does not "
                                    "join the job (exit 93, do not requeue here)"));
  CHECK_THAT(r.out, !Catch::Contains("ready rank="));
  // Bounded: a check that hangs is a failed check.
  ProcessResult slow = OneNode({"--health_check", "sleep 30", "--health_check_timeout=0.5"});
  CHECK(slow.exit_code == 93);
  CHECK_THAT(slow.err, Catch::Contains("--health_check 'sleep 30' did not finish in 0.5 s"));
  // Healthy, or the checks off: the job runs.
  CHECK(OneNode({"--health_check", "true"}).exit_code == 0);
  ProcessResult off =
      OneNode({"--health_checks=off", "--health_check", "exit 1", "--health_folders=/proc"});
  CHECK(off.exit_code == 0);
  CHECK_THAT(off.out, Catch::Contains("ready rank="));
}

TEST_CASE(
    "folders that cannot be written and an address that is not this machine's are "
    "unhealthy",
    "[health]") {
  mxrun::testing::TempDir dir;
  ProcessResult r = OneNode(
      {"--health_folders=" + dir.path() + ",/proc/no-such-folder", "--local_addr=192.0.2.1"});
  INFO(r.err);
  CHECK(r.exit_code == 93);
  CHECK_THAT(r.err, Catch::Contains("folder /proc/no-such-folder: cannot write there"));
  CHECK_THAT(r.err, !Catch::Contains("folder " + dir.path()));
  CHECK_THAT(r.err, Catch::Contains("address 192.0.2.1 (--local_addr): not an address of this "
                                    "machine"));
  ProcessResult full = OneNode({"--health_folders=" + dir.path(), "--health_min_disk=100000000"});
  CHECK(full.exit_code == 93);
  CHECK_THAT(full.err, Catch::Contains("MiB needed (--health_min_disk)"));
}

TEST_CASE(
    "GPU health through NVML: retired pages, row remaps and free memory are checked on the "
    "workers' GPUs",
    "[health]") {
  mxrun::testing::TempDir dir;
  const std::string state = dir.path() + "/nvml";
  std::ofstream(state) << "GPU-aaaa used_mib=100 retired_pending=1\n"
                          "GPU-bbbb used_mib=81000 remap_failed=1\n";
  ProcessResult r = OneNode({}, FakeGpus(state));
  INFO(r.err);
  CHECK(r.exit_code == 93);
  CHECK_THAT(r.err, Catch::Contains("GPU 0: retired memory pages pending"));
  CHECK_THAT(r.err,
             Catch::Contains("GPU 1: a memory row remap failed (the GPU should be replaced)"));
  CHECK_THAT(r.err,
             Catch::Contains("GPU 1: 920 MiB free, 1024 MiB needed (--health_min_gpu_free)"));
  // More workers than GPUs and no CUDA_VISIBLE_DEVICES (CPU work on a GPU machine, as torchrun
  // runs it; seen on a one-GPU H200): local rank 1 has no GPU of its own, and the job runs.
  std::map<std::string, std::string> one_gpu{
      {"LD_LIBRARY_PATH", mxrun::testing::FakeNvmlLibraryPath()},
      {"FAKE_NVML_DEVICES", "GPU-aaaa@0000:00:03.0"},
      {"FAKE_NVML_STATE", state + ".none"}};
  ProcessResult more_workers = OneNode({}, one_gpu);
  INFO(more_workers.err);
  CHECK(more_workers.exit_code == 0);
  CHECK_THAT(more_workers.err, !Catch::Contains("not visible through NVML"));
  // A GPU that CUDA_VISIBLE_DEVICES names for a worker and NVML does not know.
  one_gpu["CUDA_VISIBLE_DEVICES"] = "0,1";
  ProcessResult missing = OneNode({}, one_gpu);
  CHECK(missing.exit_code == 93);
  CHECK_THAT(missing.err, Catch::Contains("GPU 1: not visible through NVML"));
  // A row remap waiting for a reset.
  std::ofstream(state) << "GPU-aaaa used_mib=100\nGPU-bbbb remap_pending=1\n";
  ProcessResult pending = OneNode({}, FakeGpus(state));
  CHECK(pending.exit_code == 93);
  CHECK_THAT(pending.err, Catch::Contains("GPU 1: a memory row remap is pending (the GPU needs a "
                                          "reset)"));
  // Healthy GPUs: the job runs.
  std::ofstream(state) << "GPU-aaaa used_mib=100\nGPU-bbbb remap_pending=0\n";
  CHECK(OneNode({}, FakeGpus(state)).exit_code == 0);
}

TEST_CASE(
    "an unhealthy node of a multi-node job does not join: the master's status lists it and "
    "the others go on",
    "[health]") {
  Master master;
  auto agent = [&](std::vector<std::string> extra) {
    std::vector<std::string> flags{
        "--rdzv_backend=c10d", "--rdzv_endpoint=" + master.endpoint(),
        "--rdzv_id=health2",   "--nnodes=1:2",
        "--nproc_per_node=1",  "--rdzv_conf=is_host=0,last_call_timeout=2"};
    flags.insert(flags.end(), extra.begin(), extra.end());
    return std::make_unique<Subprocess>(
        mxrun::testing::MxrunWithChild(flags, {"--ready", "--sleep=2"}));
  };
  auto bad = agent({"--health_check", "echo 'GPU fell off the bus'; exit 3"});
  ProcessResult left = bad->Wait(30s);
  INFO(left.err);
  CHECK(left.exit_code == 93);
  ProcessResult status =
      mxrun::testing::Run({MXRUN_BIN, "status", "--rdzv_endpoint=" + master.endpoint()}, {}, 20s);
  INFO(status.out << status.err);
  CHECK_THAT(status.out, Catch::Contains("  unhealthy: "));
  CHECK_THAT(status.out, Catch::Contains("exited 3: GPU fell off the bus"));
  auto good = agent({});
  ProcessResult ok = good->Wait(60s);
  INFO(ok.out << ok.err);
  CHECK(ok.exit_code == 0);
  CHECK_THAT(ok.out, Catch::Contains("world=1"));
  // Its end-of-job summary names the node that stayed out, and why.
  CHECK_THAT(ok.err, Catch::Contains("left out of the job's rounds during the job: unhealthy: "));
  CHECK_THAT(ok.err, Catch::Contains("exited 3: GPU fell off the bus"));
}

TEST_CASE(
    "with --health_check_interval a node that turns unhealthy while training stops its "
    "workers and leaves",
    "[health]") {
  mxrun::testing::TempDir dir;
  const std::string flag = dir.path() + "/broken";
  Subprocess job({MXRUN_BIN, "--standalone", "--nproc_per_node=2", "--health_check",
                  "test ! -e " + flag + " || { echo 'NVLink down'; exit 1; }",
                  "--health_check_interval=0.3", "--no_python", TEST_CHILD_BIN, "--ready",
                  "--sleep=60"});
  REQUIRE(job.WaitForStdout("ready rank=", 2, 30s));
  std::ofstream(flag) << "x";
  ProcessResult r = job.Wait(30s);
  INFO(r.out << r.err);
  CHECK(r.exit_code == 93);
  CHECK_THAT(r.err, Catch::Contains("this node is unhealthy: --health_check"));
  CHECK_THAT(r.err, Catch::Contains("exited 1: NVLink down"));
}

TEST_CASE(
    "an XID error reported while training makes the node unhealthy at the next check "
    "(application XIDs do not)",
    "[health]") {
  mxrun::testing::TempDir dir;
  const std::string state = dir.path() + "/nvml";
  std::ofstream(state) << "GPU-aaaa used_mib=100 xids=13\n";  // before the agent: not news
  std::map<std::string, std::string> env = FakeGpus(state);
  Subprocess job({MXRUN_BIN, "--standalone", "--nproc_per_node=2", "--health_check_interval=0.3",
                  "--no_python", TEST_CHILD_BIN, "--ready", "--sleep=60"},
                 env);
  REQUIRE(job.WaitForStdout("ready rank=", 2, 30s));
  WriteState(state, "GPU-aaaa used_mib=100 xids=13,43\n");  // an application's: ignored
  usleep(1'000'000);
  CHECK(CountOccurrences(job.err(), "unhealthy") == 0);
  WriteState(state, "GPU-aaaa used_mib=100 xids=13,43,79\n");  // fallen off the bus
  ProcessResult r = job.Wait(30s);
  INFO(r.out << r.err);
  CHECK(r.exit_code == 93);
  CHECK_THAT(r.err, Catch::Contains("this node is unhealthy: GPU 0: XID 79 reported since the "
                                    "last check"));
  CHECK_THAT(r.err, !Catch::Contains("XID 43"));
}
