// The fault catalogue's rows for several nodes on loopback (tests/faults/catalogue.h): an agent,
// a node or the master lost, each injected into a real job under real mxrun agents and a real
// mxrun-master, and compared with its ground truth.

#include <catch2/catch.hpp>

#include <signal.h>

#include <cstdio>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "tests/faults/catalogue_job.h"
#include "tests/free_port.h"
#include "tests/master.h"
#include "tests/network_lab.h"
#include "tests/subprocess.h"
#include "tests/temp_dir.h"
#include "tests/trainer_runs.h"

using namespace std::chrono_literals;
using mxrun::faults::Mismatch;
using mxrun::faults::Observe;
using mxrun::faults::Row;
using mxrun::testing::Describe;
using mxrun::testing::ListeningOn;
using mxrun::testing::Master;
using mxrun::testing::MxrunWithChild;
using mxrun::testing::NetworkLab;
using mxrun::testing::ProcessResult;
using mxrun::testing::Subprocess;

namespace {

// An agent of a dynamic job `id` with `nnodes` on `master`, one test_child worker with `child`;
// every agent joins the first round (a long last call).
std::unique_ptr<Subprocess> StartAgent(const Master& master, const std::string& id,
                                       const std::string& nnodes,
                                       const std::vector<std::string>& child,
                                       const std::vector<std::string>& extra = {}) {
  std::vector<std::string> flags{
      "--rdzv_backend=c10d", "--rdzv_endpoint=" + master.endpoint(), "--rdzv_id=" + id,
      "--nnodes=" + nnodes,  "--rdzv_conf=last_call_timeout=10",     "--nproc_per_node=1"};
  flags.insert(flags.end(), extra.begin(), extra.end());
  return std::make_unique<Subprocess>(MxrunWithChild(flags, child));
}

// One agent's end compared with the row.
void CheckNodeRow(std::string_view id, const ProcessResult& r) {
  INFO(Describe(r));
  CHECK(Mismatch(Row(id), Observe(r)) == "");
}

}  // namespace

TEST_CASE("fault 12 agent-sigkill: an agent killed (SIGKILL)", "[faults]") {
  Master master;
  std::vector<std::unique_ptr<Subprocess>> agents;
  for (int i = 0; i < 3; ++i) {
    agents.push_back(
        StartAgent(master, "cat-agent", "2:3", {"--ready", "--sleep=4", "--sleep-if-world=3"}));
  }
  for (auto& agent : agents) REQUIRE(agent->WaitForStdout("world=3", 1, 30s));
  REQUIRE(::kill(agents[2]->pid(), SIGKILL) == 0);
  for (int i = 0; i < 2; ++i) CheckNodeRow("agent-sigkill", agents[i]->Wait(60s));
}

TEST_CASE("fault 13 node-lost: a node lost for good (its network cut)", "[faults]") {
  const std::string why = NetworkLab::Unavailable();
  if (!why.empty()) {
    WARN("fault catalogue row skipped: " << why);
    SUCCEED("skipped");
    return;
  }
  NetworkLab lab(4);  // host 0: the master; hosts 1-3: one agent each
  Subprocess master(lab.In(0, {MXRUN_MASTER_BIN, "--host=" + lab.Address(0), "--port=0"}));
  REQUIRE(master.WaitForStdout("listening on", 1, 10s));
  const std::string endpoint = ListeningOn(master.out());
  std::vector<std::unique_ptr<Subprocess>> agents;
  for (int host = 1; host <= 3; ++host) {
    agents.push_back(std::make_unique<Subprocess>(lab.In(
        host,
        MxrunWithChild({"--rdzv_backend=c10d", "--rdzv_endpoint=" + endpoint, "--rdzv_id=cat-lost",
                        "--nnodes=2:3", "--nproc_per_node=1", "--rdzv_conf=last_call_timeout=5"},
                       {"--ready", "--sleep=4", "--sleep-if-world=3"}))));
  }
  for (auto& agent : agents) REQUIRE(agent->WaitForStdout("world=3", 1, 30s));
  lab.SetLink(3, false);  // for good: its agent waits for the master until it is killed below
  for (int i = 0; i < 2; ++i) {
    ProcessResult r = agents[i]->Wait(60s);
    INFO("agent on host " << i + 1 << ": " << Describe(r));
    CHECK(Mismatch(Row("node-lost"), Observe(r)) == "");
  }
  agents[2]->Wait(1ms);  // the lost node's agent: killed by pid
  master.Wait(1ms);
  // Nothing left running: a worker of the agent killed just now may take a moment to die of its
  // parent-death signal; 2 s is far shorter than anything the job itself would still do.
  for (int host = 0; host <= 3; ++host) CHECK(lab.PidsLeftAfter(host, 2s).empty());
}

TEST_CASE("fault 14 partition: a partition between a node and the master, healed", "[faults]") {
  Master master;
  Subprocess proxy({TCP_PROXY_BIN, "--listen=127.0.0.1:0", "--to=" + master.endpoint()});
  REQUIRE(proxy.WaitForStdout("listening on", 1, 10s));
  const std::vector<std::string> child{"--ready", "--sleep=14"};
  const std::vector<std::string> flags{"--rdzv_backend=c10d", "--rdzv_id=cat-held", "--nnodes=1:2",
                                       "--nproc_per_node=1", "--rdzv_conf=last_call_timeout=1"};
  std::vector<std::string> a_flags = flags;
  a_flags.push_back("--rdzv_endpoint=" + master.endpoint());
  std::vector<std::string> b_flags = flags;
  b_flags.push_back("--rdzv_endpoint=" + ListeningOn(proxy.out()));
  Subprocess a(MxrunWithChild(a_flags, child));
  Subprocess b(MxrunWithChild(b_flags, child));
  REQUIRE(a.WaitForStdout("world=2", 1, 30s));
  REQUIRE(b.WaitForStdout("world=2", 1, 30s));
  REQUIRE(::kill(proxy.pid(), SIGUSR1) == 0);  // every byte between b and the master now waits
  REQUIRE(a.WaitForStdout("world=1", 1, 30s));
  REQUIRE(::kill(proxy.pid(), SIGUSR2) == 0);  // healed
  ProcessResult r = a.Wait(60s);
  ProcessResult rb = b.Wait(60s);
  INFO("the node cut off: " << Describe(rb));
  CHECK(rb.exit_code == 0);
  CHECK_THAT(rb.err, Catch::Contains("no word from the rendezvous master"));
  CheckNodeRow("partition", r);
}

TEST_CASE("fault 18 master-restart: a durable master killed and restarted", "[faults]") {
  mxrun::testing::TempDir dir;
  std::set<int> taken;
  const mxrun::testing::MasterOptions options{.port = mxrun::testing::DistinctFreePort(taken),
                                              .state_dir = dir.path() + "/state"};
  auto master = std::make_unique<Master>(options);
  std::vector<std::unique_ptr<Subprocess>> agents;
  for (int i = 0; i < 2; ++i)
    agents.push_back(StartAgent(*master, "cat-durable", "2", {"--ready", "--sleep=5"}));
  for (auto& agent : agents) REQUIRE(agent->WaitForStdout("ready rank=", 1, 30s));
  master->Kill();
  master = std::make_unique<Master>(options);
  for (auto& agent : agents) CheckNodeRow("master-restart", agent->Wait(60s));
}

TEST_CASE("fault 24 repeated-failures: a node failing again and again is left out", "[faults]") {
  Master master;
  std::vector<std::unique_ptr<Subprocess>> agents;
  const std::vector<std::string> extra{"--max_restarts=3", "--exclude_backoff=120"};
  for (int i = 0; i < 2; ++i) {
    agents.push_back(StartAgent(master, "cat-offender", "2:3",
                                {"--ready", "--sleep-if-world=2", "--sleep=4"}, extra));
  }
  agents.push_back(StartAgent(master, "cat-offender", "2:3", {"--ready", "--exit=3"}, extra));
  for (int i = 0; i < 2; ++i) CheckNodeRow("repeated-failures", agents[i]->Wait(60s));
  CHECK(agents[2]->Wait(30s).exit_code == 0);  // the left-out node hears the job succeeded
}

TEST_CASE("fault 22 bad-certificate-rotation: a master's certificate rotated to a bad one",
          "[faults]") {
  mxrun::testing::TempDir pki;
  mxrun::testing::TempDir foreign;  // another CA, whose certificate parses and matches its key
  const std::string make_certs = std::string(SCRIPTS_DIR) + "/make-certs.sh";
  for (const std::vector<std::string>& step : std::vector<std::vector<std::string>>{
           {make_certs, pki.path(), "ca"},
           {make_certs, pki.path(), "node", "master", "127.0.0.1"},
           {make_certs, pki.path(), "node", "node", "127.0.0.1"},
           {make_certs, foreign.path(), "ca"},
           {make_certs, foreign.path(), "node", "master", "127.0.0.1"}}) {
    REQUIRE(mxrun::testing::Run(step).exit_code == 0);
  }
  const std::string p = pki.path();
  Master master({.extra = {"--cert=" + p + "/master.pem", "--key=" + p + "/master.key",
                           "--cacert=" + p + "/ca.pem"}});
  const std::string conf =
      "--rdzv_conf=cert=" + p + "/node.pem,key=" + p + "/node.key,cacert=" + p + "/ca.pem";
  const std::vector<std::string> flags{
      "--rdzv_backend=c10d", "--rdzv_endpoint=" + master.endpoint(),
      "--rdzv_id=cat-rot",   "--nnodes=1",
      "--nproc_per_node=1",  conf};
  Subprocess job(MxrunWithChild(flags, {"--ready", "--sleep=4"}));
  REQUIRE(job.WaitForStdout("ready rank=0", 1, 30s));
  // The operator installs the other CA's certificate by mistake, as a rotation: renamed over.
  for (const char* ext : {".pem", ".key"}) {
    REQUIRE(::rename((foreign.path() + "/master" + ext).c_str(), (p + "/master" + ext).c_str()) ==
            0);
  }
  REQUIRE(::kill(master.pid(), SIGHUP) == 0);
  REQUIRE(master.process().WaitForStderr("SIGHUP", 1, 10s));
  ::usleep(1'500'000);  // past gRPC's next read of what it serves (kTlsRefreshSeconds)
  // New connections still get the previous certificate: mxrun status with the job's files.
  ProcessResult status = mxrun::testing::Run(
      {MXRUN_BIN, "status", "--rdzv_endpoint=" + master.endpoint(), conf}, {}, 20s);
  INFO(Describe(status));
  CHECK(status.exit_code == 0);
  ProcessResult r = job.Wait(60s);
  INFO(Describe(r));
  mxrun::faults::Outcome outcome = Observe(r);
  const std::string said = master.StopAndOutput();
  INFO(said);
  outcome.notices.push_back(said);  // the master's lines are what tells this fault
  CHECK(Mismatch(Row("bad-certificate-rotation"), outcome) == "");
}

namespace {

// `count` agents of a dynamic trainer job `id` (2:3 nodes, one worker each, no standby) on
// `master`, the catalogue's trainer run in `dir`, for 2 epochs: the second all at the smaller
// world (the job and its undisturbed twin, at 3 epochs, were 163 CPU-s, a ninth of the suite).
std::vector<std::unique_ptr<Subprocess>> TrainerNodes(const Master& master,
                                                      const mxrun::testing::TempDir& dir,
                                                      const std::string& id, int count) {
  std::vector<std::unique_ptr<Subprocess>> nodes;
  for (int node = 0; node < count; ++node) {
    nodes.push_back(std::make_unique<Subprocess>(mxrun::testing::SmallRun(
        {MXRUN_BIN, "--rdzv_backend=c10d", "--rdzv_endpoint=" + master.endpoint(),
         "--rdzv_id=" + id, "--nnodes=2:3", "--node_rank=" + std::to_string(node),
         "--rdzv_conf=last_call_timeout=10", "--nproc_per_node=1", "--max_restarts=1",
         "--standby_workers=0", "train"},
        dir, {"--epochs", "2", "--log_every", "1", "--ckpt_every", "4", "--no_eval"})));
  }
  return nodes;
}

// The last epoch record's training loss, or -1.
double LastEpochLoss(const mxrun::testing::TempDir& dir) {
  const auto epochs = mxrun::testing::Metrics(dir, "epoch");
  return epochs.empty() ? -1 : epochs.back()["train_loss"].get<double>();
}

}  // namespace

TEST_CASE(
    "fault 30 node-lost-trainer: a node of a training job lost, the job goes on at a "
    "smaller world",
    "[faults]") {
  Master master;
  mxrun::testing::TempDir base;  // the same job undisturbed, at world size 3
  {
    auto nodes = TrainerNodes(master, base, "cat-world-base", 3);
    for (auto& node : nodes) REQUIRE(node->Wait(240s).exit_code == 0);
  }
  mxrun::testing::TempDir dir;
  auto nodes = TrainerNodes(master, dir, "cat-world", 3);
  REQUIRE(nodes[0]->WaitForStdout("step 10/", 1, 120s));
  // The node dies: its agent and its worker at once.
  const pid_t rank2 = mxrun::testing::WorkerOfRank(nodes[2]->pid(), 2);
  REQUIRE(rank2 > 0);
  REQUIRE(::kill(nodes[2]->pid(), SIGKILL) == 0);
  REQUIRE(::kill(rank2, SIGKILL) == 0);
  nodes[2]->Wait(10s);
  ProcessResult r = nodes[0]->Wait(240s);
  CHECK(nodes[1]->Wait(240s).exit_code == 0);
  mxrun::faults::Outcome outcome = Observe(r);
  outcome.steps_lost = mxrun::faults::StepsLost(dir);
  const auto done = mxrun::testing::Metrics(dir, "done");
  const auto base_done = mxrun::testing::Metrics(base, "done");
  REQUIRE(done.size() == 1);
  REQUIRE(base_done.size() == 1);
  outcome.same_state = done[0]["state_sha256"] == base_done[0]["state_sha256"];
  // No bitwise comparison across world sizes: the difference is measured and said instead, and
  // the job must still have learned (its last epoch's loss below its first's).
  const auto epochs = mxrun::testing::Metrics(dir, "epoch");
  REQUIRE(epochs.size() == 2);
  const double first = epochs.front()["train_loss"].get<double>();
  const double last = LastEpochLoss(dir);
  const double undisturbed = LastEpochLoss(base);
  std::printf(
      "fault catalogue: node-lost-trainer: world 3 -> 2 after step 10: last epoch's "
      "training loss %.4f (undisturbed at world 3: %.4f, %+.1f%%), first epoch's %.4f; "
      "final state %s the undisturbed run's\n",
      last, undisturbed, 100.0 * (last - undisturbed) / undisturbed, first,
      outcome.same_state == true ? "equal to" : "different from");
  CHECK(last < first);
  INFO(Describe(r));
  CHECK(Mismatch(Row("node-lost-trainer"), outcome) == "");
}
