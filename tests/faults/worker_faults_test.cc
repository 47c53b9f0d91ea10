// The fault catalogue's rows for one node (tests/faults/catalogue.h): faults of a worker, of its
// output and of its checkpoint, each injected into a real job under the real mxrun and compared
// with its ground truth.

#include <catch2/catch.hpp>

#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "tests/faults/catalogue_job.h"
#include "tests/faults/memory_cgroup.h"
#include "tests/subprocess.h"
#include "tests/temp_dir.h"
#include "tests/trainer_runs.h"

using namespace std::chrono_literals;
using mxrun::faults::Mismatch;
using mxrun::faults::Observe;
using mxrun::faults::ObserveTrainer;
using mxrun::faults::Outcome;
using mxrun::faults::Row;
using mxrun::faults::TrainerJob;
using mxrun::testing::Describe;
using mxrun::testing::IntsAfter;
using mxrun::testing::MxrunWithChild;
using mxrun::testing::ProcessResult;
using mxrun::testing::Run;
using mxrun::testing::Subprocess;
using mxrun::testing::TempDir;
using mxrun::testing::WorkerOfRank;

namespace {

const std::string kWorkers = FAULT_WORKERS_DIR;

// Fails the running test case with every difference between the outcome and the row's truth.
void CheckRow(std::string_view id, const Outcome& outcome, const ProcessResult& r) {
  INFO(Describe(r));
  CHECK(Mismatch(Row(id), outcome) == "");
}

// The catalogue's trainer job with `flags`; `inject` runs once the job is at step 10 of 96 and
// gets the job; then the job is waited for and observed.
void TrainerRow(std::string_view id, std::vector<std::string> flags,
                const std::function<void(Subprocess&)>& inject,
                std::vector<std::string> trainer_flags = {}) {
  REQUIRE(mxrun::faults::FaultFreeDigest().size() == 64);
  TempDir dir;
  Subprocess job(TrainerJob(dir, std::move(flags), std::move(trainer_flags)));
  REQUIRE(job.WaitForStdout("step 10/96", 1, 120s));
  inject(job);
  ProcessResult r = job.Wait(240s);
  CheckRow(id, ObserveTrainer(r, dir), r);
}

// Sends `signal` to the trainer job's worker of `rank`.
void SignalRank(Subprocess& job, int rank, int signal) {
  const pid_t victim = WorkerOfRank(job.pid(), rank);
  REQUIRE(victim > 0);
  REQUIRE(::kill(victim, signal) == 0);
}

}  // namespace

TEST_CASE("fault 01 worker-sigkill: a worker killed (SIGKILL)", "[faults]") {
  TrainerRow("worker-sigkill", {"--max_restarts=1"},
             [](Subprocess& job) { SignalRank(job, 1, SIGKILL); });
}

TEST_CASE(
    "fault 29 worker-sigkill-checkpoint: a worker killed, the job restarted from its "
    "checkpoint",
    "[faults]") {
  TrainerRow("worker-sigkill-checkpoint", {"--max_restarts=1"},
             [](Subprocess& job) { SignalRank(job, 1, SIGKILL); }, {"--no_in_process_restart"});
}

TEST_CASE("fault 02 worker-sigsegv: a worker crashes (SIGSEGV)", "[faults]") {
  TrainerRow("worker-sigsegv", {"--max_restarts=1"},
             [](Subprocess& job) { SignalRank(job, 1, SIGSEGV); });
}

TEST_CASE("fault 03 worker-exit-code: a worker exits with an error code", "[faults]") {
  ProcessResult r =
      Run(MxrunWithChild({"--nproc_per_node=2", "--max_restarts=1"},
                         {"--ready", "--exit=3", "--fail-below-attempt=1", "--only-rank=1"}),
          {}, 60s);
  CheckRow("worker-exit-code", Observe(r), r);
}

TEST_CASE("fault 04 worker-oom: a worker killed by the kernel's OOM killer", "[faults]") {
  mxrun::faults::MemoryCgroup cgroup(64 << 20);
  if (!cgroup.unavailable().empty()) {
    WARN("fault catalogue row skipped: " << cgroup.unavailable());
    SUCCEED("skipped");
    return;
  }
  Subprocess job(MxrunWithChild({"--nproc_per_node=2"},
                                {"--ready", "--sleep=30", "--grow-after=1", "--only-rank=1"}));
  REQUIRE(job.WaitForStdout("ready rank=", 2, 30s));
  const std::vector<int> pids = IntsAfter(job.out(), "ready rank=1 pid");
  REQUIRE(pids.size() == 1);
  REQUIRE(cgroup.Add(pids[0]) == "");  // before it grows
  ProcessResult r = job.Wait(60s);
  CheckRow("worker-oom", Observe(r), r);
}

TEST_CASE("fault 05 python-exception: a Python exception under torch's @record", "[faults]") {
  TempDir dir;
  const std::string script = dir.path() + "/raise.py";
  std::ofstream(script) << "import os\n"
                           "from torch.distributed.elastic.multiprocessing.errors import record\n"
                           "@record\n"
                           "def main():\n"
                           "    rank = int(os.environ['RANK'])\n"
                           "    if rank == 1:\n"
                           "        raise RuntimeError(f'catalogue boom from rank {rank}')\n"
                           "main()\n";
  ProcessResult r = Run({MXRUN_BIN, "--standalone", "--nproc_per_node=2", script},
                        {{"PYTHON_EXEC", PYTHON_BIN}}, 120s);
  CheckRow("python-exception", Observe(r), r);
}

TEST_CASE("fault 06 collective-hang: a hang in a collective", "[faults]") {
  TempDir tmp;  // the hang diagnostics land in TMPDIR
  ProcessResult r =
      Run({MXRUN_BIN, "--standalone", "--nproc_per_node=3", "--hang_timeout=3", "--max_restarts=0",
           std::string(PYTHON_TESTS_DIR) + "/collective_hang_worker.py", "1", "4"},
          {{"PYTHON_EXEC", PYTHON_BIN}, {"PYTHONPATH", PYTHON_MODULE_DIR}, {"TMPDIR", tmp.path()}},
          120s);
  CheckRow("collective-hang", Observe(r), r);
}

TEST_CASE("fault 07 dataloader-hang: a hang in a data loader", "[faults]") {
  ProcessResult r =
      Run({MXRUN_BIN, "--standalone", "--nproc_per_node=2", "--hang_timeout=3", "--max_restarts=1",
           kWorkers + "/dataloader_hang_worker.py", "40", "1", "10"},
          {{"PYTHON_EXEC", PYTHON_BIN}, {"PYTHONPATH", PYTHON_MODULE_DIR}}, 120s);
  CHECK_THAT(r.out, Catch::Contains("loaded 40 batches rank 1 attempt 1"));
  CheckRow("dataloader-hang", Observe(r), r);
}

TEST_CASE("fault 08 worker-sigstop: a stopped worker (SIGSTOP)", "[faults]") {
  TrainerRow("worker-sigstop", {"--max_restarts=1", "--hang_timeout=5", "--term_timeout=5"},
             [](Subprocess& job) { SignalRank(job, 1, SIGSTOP); });
}

TEST_CASE("fault 09 uninterruptible-sleep: a worker in uninterruptible sleep (D state)",
          "[faults]") {
  ProcessResult r =
      Run(MxrunWithChild({"--nproc_per_node=1", "--max_restarts=1", "--term_timeout=1"},
                         {"--vfork-wait=6", "--vfork-below-attempt=1", "--ready"}),
          {{"TORCHELASTIC_UNINTERRUPTIBLE_STATE_TIMEOUT", "1"}}, 60s);
  CheckRow("uninterruptible-sleep", Observe(r), r);
}

TEST_CASE("fault 10 no-progress-reports: a worker that never reports progress", "[faults]") {
  ProcessResult r =
      Run(MxrunWithChild({"--nproc_per_node=2", "--hang_timeout=1"}, {"--ready", "--sleep=2.5"}),
          {}, 60s);
  CheckRow("no-progress-reports", Observe(r), r);
}

TEST_CASE("fault 11 straggler: a straggler", "[faults]") {
  ProcessResult r =
      Run(MxrunWithChild({"--standalone", "--nproc_per_node=2", "--straggler_steps=5"},
                         {"--ready", "--sleep=3", "--progress=0.05", "--slow-rank=1"}),
          {}, 60s);
  CheckRow("straggler", Observe(r), r);
}

TEST_CASE("fault 19 log-disk-full: the log disk fills up", "[faults]") {
  TempDir dir;
  const std::string logs = dir.path() + "/logs";
  REQUIRE(::mkdir(logs.c_str(), 0755) == 0);
  // A 256 KiB tmpfs in a mount namespace of mxrun's own (unshare -m): the machine's mounts are
  // untouched and the mount goes with the namespace. The health check's free-space floor is off,
  // as the disk fills during the job.
  std::vector<std::string> argv{"unshare",
                                "-m",
                                "--propagation",
                                "private",
                                "sh",
                                "-c",
                                "mount -t tmpfs -o size=256k tmpfs \"$0\" && exec \"$@\"",
                                logs};
  for (const std::string& arg :
       MxrunWithChild({"--nproc_per_node=2", "--log_dir=" + logs, "--health_min_disk=0"},
                      {"--ready", "--lines=16384", "--line-length=64", "--only-rank=1"})) {
    argv.push_back(arg);
  }
  ProcessResult r = Run(argv, {}, 60s);
  CHECK(mxrun::testing::CountOccurrences(r.out, " line=16383 ") == 2);  // the console has all
  CheckRow("log-disk-full", Observe(r), r);
}

TEST_CASE("fault 20 corrupt-checkpoint: a corrupt checkpoint", "[faults]") {
  TempDir dir;
  ProcessResult first = Run(TrainerJob(dir, {}), {}, 240s);
  INFO(Describe(first));
  REQUIRE(first.exit_code == 0);
  std::ofstream(dir.path() + "/ckpt/checkpoint.pt", std::ios::trunc) << "bit rot";
  std::vector<std::string> argv = TrainerJob(dir, {"--max_restarts=1"});
  argv.push_back("--resume");
  ProcessResult r = Run(argv, {}, 240s);
  CheckRow("corrupt-checkpoint", Observe(r), r);
}

TEST_CASE("fault 21 port-taken: the rendezvous port taken by another program", "[faults]") {
  // A foreign listener on a port the kernel chose.
  const int listener = ::socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(listener >= 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0);
  REQUIRE(::listen(listener, 4) == 0);
  socklen_t length = sizeof(address);
  REQUIRE(::getsockname(listener, reinterpret_cast<sockaddr*>(&address), &length) == 0);
  const std::string endpoint = "127.0.0.1:" + std::to_string(ntohs(address.sin_port));
  ProcessResult r = Run(MxrunWithChild({"--nnodes=1", "--nproc_per_node=2", "--rdzv_backend=c10d",
                                        "--rdzv_endpoint=" + endpoint, "--rdzv_id=taken"},
                                       {"--ready"}),
                        {}, 60s);
  ::close(listener);
  CheckRow("port-taken", Observe(r), r);
}

TEST_CASE("fault 23 standby-dies: a warm standby dies before it is promoted", "[faults]") {
  TrainerRow("standby-dies", {"--max_restarts=1", "--standby_workers=1"}, [](Subprocess& job) {
    REQUIRE(job.WaitForStderr("ready to take a rank in-process", 1, 120s));
    const std::string started = "standby worker started (pid ";
    const size_t at = job.err().find(started);
    REQUIRE(at != std::string::npos);
    const pid_t standby = std::atoi(job.err().c_str() + at + started.size());
    REQUIRE(standby > 0);
    REQUIRE(::kill(standby, SIGKILL) == 0);
    REQUIRE(
        job.WaitForStderr("standby worker (pid " + std::to_string(standby) + ") ended", 1, 30s));
    // Its replacement is warm before the next failure.
    REQUIRE(job.WaitForStderr("ready to take a rank in-process", 2, 120s));
    SignalRank(job, 1, SIGKILL);
  });
}

TEST_CASE("fault 27 preemption-warning: a preemption warning (SIGUSR1)", "[faults]") {
  Subprocess job(MxrunWithChild({"--nproc_per_node=2", "--signals_to_handle=SIGTERM,SIGUSR1"},
                                {"--ready", "--sleep=3", "--report-usr1"}));
  REQUIRE(job.WaitForStdout("ready rank=", 2, 30s));
  REQUIRE(::kill(job.pid(), SIGUSR1) == 0);
  ProcessResult r = job.Wait(60s);
  CHECK(mxrun::testing::CountOccurrences(r.out, "got SIGUSR1") == 2);
  CheckRow("preemption-warning", Observe(r), r);
}

TEST_CASE("fault 28 gpu-xid: a GPU fault (XID 79, fallen off the bus) while training", "[faults]") {
  TempDir dir;
  const std::string state = dir.path() + "/nvml";
  std::ofstream(state) << "GPU-aaaa used_mib=100\n";
  Subprocess job(
      MxrunWithChild({"--standalone", "--nproc_per_node=2", "--health_check_interval=0.3"},
                     {"--ready", "--sleep=60"}),
      {{"LD_LIBRARY_PATH", FAKE_NVML_DIR},
       {"FAKE_NVML_DEVICES", "GPU-aaaa@0000:00:03.0,GPU-bbbb@0000:00:04.0"},
       {"FAKE_NVML_STATE", state}});
  REQUIRE(job.WaitForStdout("ready rank=", 2, 30s));
  {  // rewritten whole, as the fake reads it at any time
    std::ofstream(state + ".new") << "GPU-aaaa used_mib=100 xids=79\n";
    REQUIRE(::rename((state + ".new").c_str(), state.c_str()) == 0);
  }
  ProcessResult r = job.Wait(60s);
  CheckRow("gpu-xid", Observe(r), r);
}
