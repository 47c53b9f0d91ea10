// Jobs that share a host never touch each other (issue 29): a master an agent hosts serves its own
// run only; Slurm jobs whose first node is the same find their own master among their block of
// ports, past strangers and other jobs; cancelling one leaves the others running. And how a job
// ends when cancelled: the one-line summary, a grace that fits Slurm's KillWait, SIGUSR1 passed
// on; and the warning when a master listens beyond loopback with no token and no TLS.
// Every process is real (mxrun agents, test_child workers) on 127.0.0.1; every wait is bounded.

#include <catch2/catch.hpp>

#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <memory>
#include <random>
#include <set>

#include "launcher/launch_flags/slurm.h"
#include "rendezvous/net.h"
#include "tests/subprocess.h"

using namespace std::chrono_literals;
using mxrun::testing::CountOccurrences;
using mxrun::testing::IntsAfter;
using mxrun::testing::ProcessResult;
using mxrun::testing::Subprocess;
using mxrun::testing::TempDir;

namespace {

std::vector<std::string> Agent(std::vector<std::string> flags, std::vector<std::string> child) {
  return mxrun::testing::MxrunWithChild(flags, child);
}

int FreePort() {
  absl::StatusOr<int> port = mxrun::PickFreePort("127.0.0.1");
  REQUIRE(port.ok());
  return *port;
}

// A TCP socket listening on 127.0.0.1:port (-1 when the port is taken): a stranger on a port.
int Listen(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = htons(static_cast<uint16_t>(port));
  if (bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 || listen(fd, 4) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// A Slurm job id whose block of rendezvous ports (launcher/launch_flags/slurm.h) is free on this
// host now, and the listening sockets that proved it (closed by the caller, or kept as strangers).
struct FreeBlock {
  long job_id = 0;
  int port = 0;
  std::vector<int> fds;
};
FreeBlock FindFreeBlock() {
  std::mt19937 random(std::random_device{}());
  for (int attempt = 0; attempt < 50; ++attempt) {
    FreeBlock block;
    block.job_id = 100000 + static_cast<long>(random() % 800000);
    block.port = mxrun::SlurmRendezvousPort(std::to_string(block.job_id));
    for (int i = 0; i < mxrun::kSlurmRendezvousPortCandidates; ++i) {
      const int fd = Listen(block.port + i);
      if (fd < 0) break;
      block.fds.push_back(fd);
    }
    if (static_cast<int>(block.fds.size()) == mxrun::kSlurmRendezvousPortCandidates) return block;
    for (int fd : block.fds) close(fd);
  }
  FAIL("no Slurm port block free on this host in 50 tries");
  return {};
}

// The variables srun gives task `node` of a 2-node job on "nodes" that are all this host.
std::map<std::string, std::string> SlurmNode(long job_id, int node) {
  return {{"SLURM_JOB_ID", std::to_string(job_id)}, {"SLURM_NNODES", "2"},
          {"SLURM_NODEID", std::to_string(node)},   {"SLURM_JOB_NODELIST", "127.0.0.1,127.0.0.1"},
          {"SLURM_PROCID", std::to_string(node)},   {"SLURM_NTASKS", "2"}};
}

}  // namespace

TEST_CASE(
    "a master an agent hosts serves its own run only: another job on its endpoint is "
    "refused and the first job goes on",
    "[isolation]") {
  const std::string endpoint = "127.0.0.1:" + std::to_string(FreePort());
  auto node = [&](const std::string& id, int rank) {
    return std::make_unique<Subprocess>(
        Agent({"--rdzv_backend=c10d", "--rdzv_endpoint=" + endpoint, "--rdzv_id=" + id,
               "--nnodes=2", "--node_rank=" + std::to_string(rank), "--nproc_per_node=2"},
              {"--ready", "--sleep=4"}));
  };
  auto a0 = node("job-a", 0);
  REQUIRE(a0->WaitForStderr("hosting the rendezvous master", 1, 30s));
  auto a1 = node("job-a", 1);
  REQUIRE(a0->WaitForStdout("ready rank", 2, 30s));
  // Job B names the same endpoint: its agents find it taken and join it as clients.
  auto b0 = node("job-b", 0);
  ProcessResult b = b0->Wait(30s);
  INFO(mxrun::testing::Describe(b));
  CHECK(b.exit_code == 3);
  CHECK_THAT(b.err, Catch::Contains("belongs to run 'job-a'") &&
                        Catch::Contains("run 'job-b' must use an endpoint of its own"));
  CHECK(CountOccurrences(b.out, "ready rank") == 0);
  for (auto* agent : {a0.get(), a1.get()}) {
    ProcessResult r = agent->Wait(60s);
    INFO(mxrun::testing::Describe(r));
    CHECK(r.exit_code == 0);
    CHECK(IntsAfter(r.out, "world") == std::vector<int>(2, 4));
    CHECK(CountOccurrences(r.out, "run=job-a") == 2);
  }
}

TEST_CASE(
    "three Slurm jobs with the same first node and the same port block each find their "
    "own master past a stranger, and cancelling one leaves the others to finish",
    "[isolation][slurm]") {
  FreeBlock block = FindFreeBlock();
  // The block's first port stays taken by a stranger (not an mxrun master); the rest are freed.
  for (size_t i = 1; i < block.fds.size(); ++i) close(block.fds[i]);
  const int stranger = block.fds[0];
  // Job ids a block's span apart share the block: the worst case of jobs meeting.
  const long blocks = mxrun::kSlurmRendezvousPortSpan / mxrun::kSlurmRendezvousPortCandidates;
  const std::vector<long> jobs = {block.job_id, block.job_id + blocks, block.job_id + 2 * blocks};
  for (long job : jobs) REQUIRE(mxrun::SlurmRendezvousPort(std::to_string(job)) == block.port);
  auto task = [&](long job, int node, const std::string& sleep) {
    return std::make_unique<Subprocess>(
        Agent({"--nproc_per_node=2", "--term_timeout=5"}, {"--ready", "--sleep=" + sleep}),
        SlurmNode(job, node));
  };
  // Each job's node 1 starts before its host: it keeps asking until its master is there. Job k's
  // host finds the stranger and the k-1 jobs before it, and takes the block's port k+1.
  std::vector<std::unique_ptr<Subprocess>> node0, node1;
  for (size_t k = 0; k < jobs.size(); ++k) {
    node1.push_back(task(jobs[k], 1, k == 0 ? "60" : "4"));
    node0.push_back(task(jobs[k], 0, k == 0 ? "60" : "4"));
    REQUIRE(node0[k]->WaitForStderr("hosting the rendezvous master", 1, 30s));
    CHECK_THAT(node0[k]->err(), Catch::Contains(absl::StrCat("127.0.0.1:", block.port + 1 + k)));
  }
  REQUIRE(node0[0]->WaitForStdout("ready rank", 2, 30s));
  REQUIRE(node1[0]->WaitForStdout("ready rank", 2, 30s));
  // Cancel job 1 (as scancel does: SIGTERM to every task) while the others run.
  kill(node0[0]->pid(), SIGTERM);
  kill(node1[0]->pid(), SIGTERM);
  for (auto* agent : {node0[0].get(), node1[0].get()}) {
    ProcessResult r = agent->Wait(30s);
    INFO(mxrun::testing::Describe(r));
    CHECK(r.exit_code == 143);
    CHECK_THAT(r.err, Catch::Contains("cancelled by SIGTERM: ranks"));
    CHECK(CountOccurrences(r.out, "run=slurm-" + std::to_string(jobs[0])) == 2);
  }
  for (size_t k = 1; k < jobs.size(); ++k) {
    std::vector<int> ranks;
    for (auto* agent : {node0[k].get(), node1[k].get()}) {
      ProcessResult r = agent->Wait(60s);
      INFO(mxrun::testing::Describe(r));
      CHECK(r.exit_code == 0);
      CHECK(IntsAfter(r.out, "world") == std::vector<int>(2, 4));
      CHECK(CountOccurrences(r.out, "run=slurm-" + std::to_string(jobs[k])) == 2);
      for (int rank : IntsAfter(r.out, "ready rank")) ranks.push_back(rank);
    }
    std::sort(ranks.begin(), ranks.end());
    CHECK(ranks == std::vector<int>{0, 1, 2, 3});
  }
  close(stranger);
}

TEST_CASE(
    "three plain one-node PyTorch jobs started at once each reduce with their own ranks "
    "only, and cancelling one leaves the others to finish",
    "[isolation]") {
  // The reproduction: `mxrun --nproc_per_node=2 job.py` three times at once, each job
  // all-reducing its own number (job k's ranks give k: the right sum is 2k). Before free ports
  // per job, jobs took torchrun's fixed 29500 and reduced with each other's ranks.
  TempDir dir;
  const std::string script = dir.path() + "/job.py";
  std::ofstream(script)
      << "import os, sys, time\n"
         "import torch, torch.distributed as dist\n"
         "dist.init_process_group('gloo')\n"
         "k = float(os.environ['JOB_VALUE'])\n"
         "for turn in range(2):\n"
         "    t = torch.tensor([k])\n"
         "    dist.all_reduce(t)\n"
         "    print(f'sum={int(t.item())} turn={turn} world={dist.get_world_size()} "
         "run={os.environ[\"TORCHELASTIC_RUN_ID\"]}', flush=True)\n"
         "    time.sleep(float(os.environ['JOB_SLEEP']))\n"
         "dist.destroy_process_group()\n";
  auto job = [&](int k, const std::string& sleep) {
    return std::make_unique<Subprocess>(
        std::vector<std::string>{MXRUN_BIN, "--nproc_per_node=2", script},
        std::map<std::string, std::string>{{"PYTHON_EXEC", PYTHON_BIN},
                                           {"JOB_VALUE", std::to_string(k)},
                                           {"JOB_SLEEP", sleep},
                                           // each rank's own lines (the test counts them)
                                           {"MXRUN_LOG_COLLAPSE_WINDOW", "0"}});
  };
  auto one = job(1, "60");
  auto two = job(2, "3");
  auto three = job(3, "3");
  REQUIRE(one->WaitForStdout("turn=0", 2, 120s));
  kill(one->pid(), SIGTERM);
  ProcessResult cancelled = one->Wait(60s);
  INFO(mxrun::testing::Describe(cancelled));
  CHECK(cancelled.exit_code == 143);
  CHECK(IntsAfter(cancelled.out, "sum") == std::vector<int>(2, 2));
  std::set<std::string> runs;
  for (auto [k, process] : {std::pair{2, two.get()}, std::pair{3, three.get()}}) {
    ProcessResult r = process->Wait(120s);
    INFO(mxrun::testing::Describe(r));
    CHECK(r.exit_code == 0);
    CHECK(IntsAfter(r.out, "sum") == std::vector<int>(4, 2 * k));  // 2 ranks x 2 turns
    CHECK(IntsAfter(r.out, "world") == std::vector<int>(4, 2));
    const size_t at = r.out.find("run=");
    REQUIRE(at != std::string::npos);
    runs.insert(r.out.substr(at, r.out.find('\n', at) - at));
  }
  CHECK(runs.size() == 2);
}

TEST_CASE("cancelled, mxrun says in one line how each rank ended and exits 128+signal",
          "[cancel]") {
  SECTION("workers that a signal ends") {
    Subprocess mxrun(Agent({"--nproc_per_node=2"}, {"--ready", "--sleep=60"}));
    REQUIRE(mxrun.WaitForStdout("ready rank", 2, 30s));
    kill(mxrun.pid(), SIGINT);
    ProcessResult r = mxrun.Wait(30s);
    INFO(mxrun::testing::Describe(r));
    CHECK(r.exit_code == 130);
    CHECK_THAT(r.err,
               Catch::Contains("cancelled by SIGINT: ranks 0-1 ended by SIGINT; exit code 130"));
  }
  SECTION("workers that end on SIGTERM") {
    Subprocess mxrun(Agent({"--nproc_per_node=2", "--term_timeout=10"}, {"--ready", "--sleep=60"}));
    REQUIRE(mxrun.WaitForStdout("ready rank", 2, 30s));
    kill(mxrun.pid(), SIGTERM);
    ProcessResult r = mxrun.Wait(30s);
    INFO(mxrun::testing::Describe(r));
    CHECK(r.exit_code == 143);
    CHECK_THAT(r.err, Catch::Contains("cancelled by SIGTERM: ranks 0-1 exited 143; exit code 143"));
  }
  SECTION("workers that ignore it are SIGKILLed when the grace runs out") {
    Subprocess mxrun(Agent({"--nproc_per_node=2", "--term_timeout=1"},
                           {"--ready", "--sleep=60", "--ignore-sigterm"}));
    REQUIRE(mxrun.WaitForStdout("ready rank", 2, 30s));
    kill(mxrun.pid(), SIGTERM);
    ProcessResult r = mxrun.Wait(30s);
    INFO(mxrun::testing::Describe(r));
    CHECK(r.exit_code == 143);
    CHECK_THAT(r.err, Catch::Contains("cancelled by SIGTERM: ranks 0-1 SIGKILLed after the 1 s "
                                      "grace; exit code 143"));
  }
}

TEST_CASE("under Slurm the grace fits KillWait, read from scontrol", "[cancel][slurm]") {
  // A stand-in scontrol (the real one is exercised by the Slurm cluster tests): it prints what
  // `scontrol show config` prints about KillWait.
  TempDir dir;
  const std::string scontrol = dir.path() + "/scontrol";
  {
    std::ofstream script(scontrol);
    script << "#!/bin/sh\n[ \"$1 $2\" = 'show config' ] || exit 1\n"
              "echo 'KillOnBadExit           = 0'\necho 'KillWait                = 3 sec'\n";
  }
  chmod(scontrol.c_str(), 0755);
  std::map<std::string, std::string> env = {{"SLURM_JOB_ID", "4242"},
                                            {"SLURM_NNODES", "1"},
                                            {"SLURM_JOB_NODELIST", "127.0.0.1"},
                                            {"PATH", dir.path() + ":/usr/bin:/bin"}};
  Subprocess mxrun(Agent({"--nproc_per_node=1"}, {"--ready", "--sleep=60", "--ignore-sigterm"}),
                   env);
  REQUIRE(mxrun.WaitForStdout("ready rank", 1, 30s));
  kill(mxrun.pid(), SIGTERM);
  ProcessResult r = mxrun.Wait(30s);
  INFO(mxrun::testing::Describe(r));
  CHECK(r.exit_code == 143);
  CHECK_THAT(r.err, Catch::Contains("Slurm's KillWait is 3 s: workers get 2 s after SIGTERM"));
  CHECK_THAT(r.err, Catch::Contains("rank 0 SIGKILLed after the 2 s grace"));
  // --term_timeout wins, and scontrol is not asked.
  ProcessResult given =
      mxrun::testing::Run(Agent({"--nproc_per_node=1", "--term_timeout=7"}, {"--ready"}), env, 30s);
  CHECK(given.exit_code == 0);
  CHECK_THAT(given.err, !Catch::Contains("KillWait"));
}

TEST_CASE("SIGUSR1 in --signals_to_handle reaches every worker and the job goes on", "[cancel]") {
  Subprocess mxrun(Agent({"--nproc_per_node=2", "--signals_to_handle=SIGTERM,SIGUSR1"},
                         {"--ready", "--sleep=60", "--report-usr1"}));
  REQUIRE(mxrun.WaitForStdout("ready rank", 2, 30s));
  kill(mxrun.pid(), SIGUSR1);
  REQUIRE(mxrun.WaitForStdout("got SIGUSR1", 2, 30s));
  CHECK(mxrun::testing::IsAlive(mxrun.pid()));
  kill(mxrun.pid(), SIGTERM);
  ProcessResult r = mxrun.Wait(30s);
  INFO(mxrun::testing::Describe(r));
  CHECK(r.exit_code == 143);
  CHECK_THAT(r.out, Catch::Contains("got SIGUSR1 rank=0") && Catch::Contains("got SIGUSR1 rank=1"));
  CHECK_THAT(r.err, Catch::Contains("received SIGUSR1: passed it on to 2 running worker(s)"));
}

TEST_CASE("a master listening beyond loopback with neither token nor TLS is said out loud",
          "[isolation][security]") {
  const std::string port = std::to_string(FreePort());
  auto run = [&](std::vector<std::string> conf) {
    std::vector<std::string> flags{"--rdzv_backend=c10d", "--rdzv_endpoint=127.0.0.1:" + port,
                                   "--rdzv_id=open", "--nnodes=1", "--nproc_per_node=1"};
    flags.insert(flags.end(), conf.begin(), conf.end());
    return mxrun::testing::Run(Agent(flags, {}), {}, 60s);
  };
  ProcessResult open = run({"--rdzv_conf=bind_all=1"});
  INFO(mxrun::testing::Describe(open));
  CHECK(open.exit_code == 0);
  CHECK(CountOccurrences(open.err, "with neither a token nor TLS") == 1);
  CHECK_THAT(open.err, Catch::Contains("--rdzv_conf token_file=FILE"));
  TempDir dir;
  const std::string token = dir.path() + "/token";
  std::ofstream(token) << "s3cret-token-for-the-test\n";
  chmod(token.c_str(), 0600);
  ProcessResult closed = run({"--rdzv_conf=bind_all=1,token_file=" + token});
  INFO(mxrun::testing::Describe(closed));
  CHECK(closed.exit_code == 0);
  CHECK_THAT(closed.err, !Catch::Contains("neither a token nor TLS"));
  ProcessResult loopback = run({});
  CHECK(loopback.exit_code == 0);
  CHECK_THAT(loopback.err, !Catch::Contains("neither a token nor TLS"));
  // mxrun-master --host=0.0.0.0 says it too (started, then stopped by pid).
  Subprocess master({MXRUN_MASTER_BIN, "--host=0.0.0.0", "--port=0"});
  REQUIRE(master.WaitForStderr("with neither a token nor TLS", 1, 30s));
  CHECK_THAT(master.err(), Catch::Contains("--token_file FILE"));
}
