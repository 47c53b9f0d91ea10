// No single point of failure (--rdzv_backend=etcd): real etcd members, real agents, real
// mxrun-master replicas, real PyTorch. The node hosting the master dies; a standby replica takes
// over; the etcd leader dies; a paused master comes back after its successor took over; etcd is
// gone for a while. Plus the fence itself against etcd. Every wait is bounded.

#include <catch2/catch.hpp>

#include <signal.h>

#include <memory>
#include <thread>

#include "agent/process/descendants.h"
#include "rendezvous/etcd/etcd_master_store.h"
#include "rendezvous/etcd_config.h"
#include "tests/etcd_cluster.h"
#include "tests/metrics_client.h"
#include "tests/persisted_runs.h"
#include "tests/subprocess.h"
#include "tests/temp_dir.h"

using namespace std::chrono_literals;
using mxrun::testing::CountOccurrences;
using mxrun::testing::EtcdCluster;
using mxrun::testing::ProcessResult;
using mxrun::testing::Subprocess;

namespace {

std::vector<std::string> EtcdJob(const EtcdCluster& etcd, const std::string& id,
                                 const std::string& nnodes, std::vector<std::string> more = {}) {
  std::vector<std::string> flags{"--rdzv_backend=etcd", "--rdzv_endpoint=" + etcd.Endpoints(),
                                 "--rdzv_id=" + id, "--nnodes=" + nnodes};
  flags.insert(flags.end(), more.begin(), more.end());
  return flags;
}

std::unique_ptr<Subprocess> ChildAgent(std::vector<std::string> flags,
                                       std::vector<std::string> child) {
  return std::make_unique<Subprocess>(mxrun::testing::MxrunWithChild(flags, child));
}

// The process that logged that it serves as the master (agents or replicas), or -1.
int Serving(std::vector<Subprocess*> processes, std::chrono::milliseconds wait) {
  const auto deadline = std::chrono::steady_clock::now() + wait;
  do {
    for (size_t i = 0; i < processes.size(); ++i) {
      if (processes[i]->WaitForStderr("serving on", 1, 50ms)) return static_cast<int>(i);
    }
  } while (std::chrono::steady_clock::now() < deadline);
  return -1;
}

// A node's death: the agent and every worker under it, SIGKILL, by pid.
void KillNode(Subprocess& agent) {
  const std::vector<pid_t> workers = mxrun::ListDescendants(agent.pid(), {});
  REQUIRE(kill(agent.pid(), SIGKILL) == 0);
  for (pid_t pid : workers) kill(pid, SIGKILL);
  agent.Wait(10s);
}

// One mxrun-master replica of service `service` (with `more` flags).
std::unique_ptr<Subprocess> Replica(const EtcdCluster& etcd, const std::string& service,
                                    std::vector<std::string> more = {}) {
  std::vector<std::string> argv{MXRUN_MASTER_BIN, "--rdzv_backend=etcd",
                                "--rdzv_endpoint=" + etcd.Endpoints(), "--service=" + service};
  argv.insert(argv.end(), more.begin(), more.end());
  auto replica = std::make_unique<Subprocess>(argv);
  REQUIRE(replica->WaitForStdout("candidate for service " + service, 1, 10s));
  return replica;
}

// "host:port" of a replica's metrics endpoint (each picks a free one: no --port given).
std::string ReplicaMetrics(Subprocess& replica) {
  REQUIRE(replica.WaitForStdout("metrics at http://", 1, 10s));
  const std::string& out = replica.out();
  const size_t at = out.find("metrics at http://") + 18;
  return out.substr(at, out.find("/metrics", at) - at);
}

void CheckNoRestarts(const ProcessResult& r) {
  INFO(r.out << r.err);
  CHECK(r.exit_code == 0);
  CHECK(r.err.find("restarting") == std::string::npos);
  CHECK(r.err.find("re-forming") == std::string::npos);
  CHECK(CountOccurrences(r.out, "ready rank=") == 1);  // the worker started once
}

}  // namespace

TEST_CASE(
    "etcd: the node hosting the master dies: the survivors re-form at world size 2 and a "
    "Gloo all-reduce succeeds",
    "[etcd_ha][pytorch]") {
  EtcdCluster etcd(3);
  std::vector<std::unique_ptr<Subprocess>> agents;
  for (int i = 0; i < 3; ++i) {
    std::vector<std::string> argv{MXRUN_BIN};
    for (const std::string& f : EtcdJob(
             etcd, "ha-gloo", "2:3", {"--nproc_per_node=1", "--rdzv_conf=last_call_timeout=2"})) {
      argv.push_back(f);
    }
    for (const std::string& a :
         {std::string(EXAMPLES_DIR) + "/ddp_allreduce.py", std::string("--hold-if-world=3"),
          std::string("--hold-seconds=120")}) {
      argv.push_back(a);
    }
    agents.push_back(std::make_unique<Subprocess>(
        argv, std::map<std::string, std::string>{{"PYTHON_EXEC", PYTHON_BIN}}));
  }
  for (auto& agent : agents) {
    REQUIRE(agent->WaitForStdout("allreduce ok: sum=6.0 world_size=3 attempt=0", 1, 180s));
  }
  const int host = Serving({agents[0].get(), agents[1].get(), agents[2].get()}, 1s);
  REQUIRE(host >= 0);
  KillNode(*agents[host]);
  std::string out;
  for (int i = 0; i < 3; ++i) {
    if (i == host) continue;
    ProcessResult r = agents[i]->Wait(180s);
    INFO(r.out << r.err);
    CHECK(r.exit_code == 0);
    CHECK_THAT(r.err, Catch::Contains("its agent held the expired master lease"));
    out += r.out;
  }
  CHECK(CountOccurrences(out, "allreduce ok: sum=3.0 world_size=2 attempt=0") == 2);
  CHECK(CountOccurrences(out, "ddp parameters identical on every rank") == 2);
}

TEST_CASE(
    "etcd: the agent elected master serves the master's metrics and page on its metrics "
    "port, and the others say where it is",
    "[etcd_ha][metrics]") {
  EtcdCluster etcd(1);
  std::vector<std::unique_ptr<Subprocess>> agents;
  for (int i = 0; i < 2; ++i) {
    agents.push_back(ChildAgent(EtcdJob(etcd, "elected-metrics", "2", {"--metrics_port=0"}),
                                {"--ready", "--sleep=30"}));
  }
  for (auto& agent : agents) REQUIRE(agent->WaitForStdout("ready rank=", 1, 30s));
  const int host = Serving({agents[0].get(), agents[1].get()}, 5s);
  REQUIRE(host >= 0);
  using mxrun::testing::AgentMetricsEndpoint;
  using mxrun::testing::Curl;
  const std::string leader = "http://" + AgentMetricsEndpoint(*agents[host]);
  const std::string other = "http://" + AgentMetricsEndpoint(*agents[1 - host]);
  const std::string page = Curl(leader + "/metrics");
  CHECK_THAT(page, Catch::Contains("\nmxrun_master_leading 1\n"));
  CHECK_THAT(page, Catch::Contains("mxrun_run_world_size{run_id=\"elected-metrics\"} 2\n"));
  CHECK_THAT(page, Catch::Contains("mxrun_agent_world_size{run_id=\"elected-metrics\""));
  CHECK_THAT(Curl(leader + "/"), Catch::Contains("run elected-metrics: "));
  const std::string idle = Curl(other + "/metrics");
  CHECK_THAT(idle, Catch::Contains("mxrun_agent_world_size{run_id=\"elected-metrics\""));
  CHECK_THAT(idle, !Catch::Contains("mxrun_master_leading"));
  CHECK_THAT(Curl(other + "/"), Catch::Contains("the elected master serves the rendezvous at "));
  for (auto& agent : agents) kill(agent->pid(), SIGTERM);
  for (auto& agent : agents) CHECK(agent->Wait(30s).exit_code == 143);
}

TEST_CASE(
    "etcd: a standby mxrun-master replica takes over from a killed one: no worker restarts, and "
    "each replica's metrics say whether it leads, the leader's have the runs",
    "[etcd_ha][metrics]") {
  EtcdCluster etcd(3);
  auto first = Replica(etcd, "svc");
  REQUIRE(first->WaitForStderr("serving on", 1, 10s));
  auto standby = Replica(etcd, "svc");
  std::vector<std::unique_ptr<Subprocess>> agents;
  for (int i = 0; i < 2; ++i) {
    agents.push_back(ChildAgent(EtcdJob(etcd, "standby", "2", {"--rdzv_conf=master_service=svc"}),
                                {"--ready", "--sleep=15"}));
  }
  for (auto& agent : agents) REQUIRE(agent->WaitForStdout("ready rank=", 1, 30s));
  CHECK_FALSE(standby->WaitForStderr("serving on", 1, 100ms));
  // mxrun status finds the serving replica through etcd.
  ProcessResult status =
      mxrun::testing::Run({MXRUN_BIN, "status", "--rdzv_backend=etcd",
                           "--rdzv_endpoint=" + etcd.Endpoints(), "--rdzv_conf=master_service=svc"},
                          {}, 20s);
  INFO(status.out << status.err);
  CHECK(status.exit_code == 0);
  CHECK_THAT(status.out, Catch::Contains("run standby: running, round 0, nodes 2:2, world size 2"));
  // The leader's metrics and page have the run; the standby's say it stands by.
  using mxrun::testing::Curl;
  const std::string first_metrics = "http://" + ReplicaMetrics(*first);
  const std::string standby_metrics = "http://" + ReplicaMetrics(*standby);
  CHECK_THAT(Curl(first_metrics + "/metrics"), Catch::Contains("\nmxrun_master_leading 1\n"));
  CHECK_THAT(Curl(first_metrics + "/metrics"),
             Catch::Contains("mxrun_run_world_size{run_id=\"standby\"} 2\n"));
  CHECK_THAT(Curl(first_metrics + "/"), Catch::Contains("run standby: "));
  const std::string idle = Curl(standby_metrics + "/metrics");
  CHECK_THAT(idle, Catch::Contains("\nmxrun_master_leading 0\n"));
  CHECK_THAT(idle, !Catch::Contains("run_id=\"standby\""));
  CHECK_THAT(Curl(standby_metrics + "/"),
             Catch::Contains("does not lead the rendezvous now; the elected master serves the "
                             "rendezvous at 127.0.0.1:"));
  REQUIRE(kill(first->pid(), SIGKILL) == 0);
  first->Wait(10s);
  REQUIRE(standby->WaitForStderr("serving on", 1, 10s));
  // The new leader's metrics have the run once its agents are back (bounded wait).
  std::string taken;
  for (int i = 0; i < 50; ++i) {
    taken = Curl(standby_metrics + "/metrics");
    if (taken.find("mxrun_run_world_size{run_id=\"standby\"} 2\n") != std::string::npos) break;
    std::this_thread::sleep_for(100ms);
  }
  CHECK_THAT(taken, Catch::Contains("\nmxrun_master_leading 1\n"));
  CHECK_THAT(taken, Catch::Contains("mxrun_run_world_size{run_id=\"standby\"} 2\n"));
  for (auto& agent : agents) CheckNoRestarts(agent->Wait(60s));
}

TEST_CASE("etcd: the etcd leader member dies mid-job: no worker restarts", "[etcd_ha]") {
  EtcdCluster etcd(3);
  std::vector<std::unique_ptr<Subprocess>> agents;
  for (int i = 0; i < 2; ++i) {
    agents.push_back(ChildAgent(EtcdJob(etcd, "etcd-leader", "2"), {"--ready", "--sleep=8"}));
  }
  for (auto& agent : agents) REQUIRE(agent->WaitForStdout("ready rank=", 1, 30s));
  ProcessResult status =
      mxrun::testing::Run({MXRUN_BIN, "status", "--rdzv_backend=etcd",
                           "--rdzv_endpoint=" + etcd.Endpoints(), "--rdzv_id=etcd-leader"},
                          {}, 20s);
  INFO(status.out << status.err);
  CHECK(status.exit_code == 0);
  CHECK_THAT(status.out, Catch::Contains("run etcd-leader: running, round 0, nodes 2:2"));
  ProcessResult nobody =
      mxrun::testing::Run({MXRUN_BIN, "status", "--rdzv_backend=etcd",
                           "--rdzv_endpoint=" + etcd.Endpoints(), "--rdzv_id=no-such-job"},
                          {}, 20s);
  CHECK(nobody.exit_code == 3);
  CHECK_THAT(nobody.err, Catch::Contains("no master serves /mxrun/run/no-such-job"));
  const int leader = etcd.LeaderIndex();
  REQUIRE(leader >= 0);
  etcd.Kill(leader);
  for (auto& agent : agents) CheckNoRestarts(agent->Wait(60s));
}

TEST_CASE(
    "etcd: a master paused past its lease is fenced off when it resumes, agents stay with "
    "its successor",
    "[etcd_ha]") {
  EtcdCluster etcd(3);
  auto first = Replica(etcd, "fence");
  REQUIRE(first->WaitForStderr("serving on", 1, 10s));
  auto second = Replica(etcd, "fence");
  std::vector<std::unique_ptr<Subprocess>> agents;
  for (int i = 0; i < 2; ++i) {
    agents.push_back(ChildAgent(EtcdJob(etcd, "paused", "2", {"--rdzv_conf=master_service=fence"}),
                                {"--ready", "--sleep=10"}));
  }
  for (auto& agent : agents) REQUIRE(agent->WaitForStdout("ready rank=", 1, 30s));
  REQUIRE(kill(first->pid(), SIGSTOP) == 0);
  REQUIRE(second->WaitForStderr("serving on", 1, 10s));
  // While the old master is still stopped, both agents re-attach to the successor (which etcd
  // names: mxrun status asks it): 2 s after the takeover, a member still detached would have been
  // silent that long; attached ones heartbeat every second.
  std::this_thread::sleep_for(2s);
  ProcessResult status = mxrun::testing::Run(
      {MXRUN_BIN, "status", "--rdzv_backend=etcd", "--rdzv_endpoint=" + etcd.Endpoints(),
       "--rdzv_conf=master_service=fence"},
      {}, 20s);
  INFO(status.out << status.err);
  std::vector<double> silences;
  for (size_t at = status.out.find("running "); at != std::string::npos;
       at = status.out.find("running ", at + 1)) {
    silences.push_back(std::stod(status.out.substr(status.out.find_first_not_of(' ', at + 8))));
  }
  REQUIRE(silences.size() == 2);
  for (double s : silences) CHECK(s < 1.5);
  REQUIRE(kill(first->pid(), SIGCONT) == 0);
  REQUIRE(first->WaitForStderr("no longer the rendezvous master", 1, 10s));
  for (auto& agent : agents) CheckNoRestarts(agent->Wait(60s));
  // The old master never served again: one term, ended.
  first->WaitForStderr("serving on", 2, 100ms);
  CHECK(CountOccurrences(first->err(), "serving on") == 1);
}

TEST_CASE("etcd: etcd unreachable for a while: running workers are not disturbed", "[etcd_ha]") {
  EtcdCluster etcd(1);
  std::vector<std::unique_ptr<Subprocess>> agents;
  for (int i = 0; i < 2; ++i) {
    agents.push_back(ChildAgent(EtcdJob(etcd, "outage", "2"), {"--ready", "--sleep=9"}));
  }
  for (auto& agent : agents) REQUIRE(agent->WaitForStdout("ready rank=", 1, 30s));
  etcd.Kill(0);
  std::this_thread::sleep_for(3s);  // longer than the 2 s lease
  etcd.Restart(0);
  for (auto& agent : agents) CheckNoRestarts(agent->Wait(60s));
}

TEST_CASE("etcd: the master's store is fenced: a deposed writer's save is refused whole",
          "[etcd_ha]") {
  EtcdCluster etcd;
  std::shared_ptr<mxrun::EtcdClient> client = etcd.Client();
  const mxrun::EtcdMasterKeys keys = mxrun::EtcdKeysForRun("/mxrun", "fenced");
  auto lease = client->GrantLease(10s);
  REQUIRE(lease.ok());
  auto won = client->CreateIfAbsent(keys.leader(), "a ", *lease);
  REQUIRE((won.ok() && won->has_value()));
  mxrun::EtcdMasterStore old_leader(client, keys.prefix, keys.leader(), **won);
  REQUIRE(old_leader.Load().ok());
  REQUIRE(old_leader.Save({mxrun::testing::SampleRun("fenced", 3)}).ok());

  // Its lease ends; a successor wins and loads what the first one wrote.
  REQUIRE(client->RevokeLease(*lease).ok());
  auto lease2 = client->GrantLease(10s);
  auto won2 = client->CreateIfAbsent(keys.leader(), "b ", *lease2);
  REQUIRE((won2.ok() && won2->has_value()));
  mxrun::EtcdMasterStore successor(client, keys.prefix, keys.leader(), **won2);
  auto loaded = successor.Load();
  REQUIRE(loaded.ok());
  REQUIRE(loaded->size() == 1);
  CHECK(loaded->at(0).members.size() == 3);

  // The deposed one's write is refused and changes nothing; the successor's goes through.
  absl::Status refused = old_leader.Save({mxrun::testing::SampleRun("fenced", 1)});
  CHECK(refused.code() == absl::StatusCode::kFailedPrecondition);
  CHECK(successor.Load()->at(0).members.size() == 3);
  REQUIRE(successor.Save({mxrun::testing::SampleRun("fenced", 2)}).ok());
  mxrun::EtcdMasterStore reader(client, keys.prefix, keys.leader(), **won2);
  CHECK(reader.Load()->at(0).members.size() == 2);
  // An unreachable etcd is not a deposition: transient, tried again.
  etcd.Kill(0);
  absl::Status unreachable = successor.Save({});
  CHECK(unreachable.code() == absl::StatusCode::kUnavailable);
}

TEST_CASE(
    "etcd: mutual TLS with the elected master: agents and mxrun status with master_cert "
    "are served, a plain agent is refused, a standby takes over with TLS",
    "[etcd_ha][tls]") {
  mxrun::testing::TempDir pki;
  const std::string dir = pki.path();
  const std::string make_certs = std::string(SCRIPTS_DIR) + "/make-certs.sh";
  for (std::vector<std::string> args : {std::vector<std::string>{make_certs, dir, "ca"},
                                        {make_certs, dir, "node", "node", "127.0.0.1"}}) {
    ProcessResult made = mxrun::testing::Run(args);
    INFO(made.err);
    REQUIRE(made.exit_code == 0);
  }
  const std::vector<std::string> master_tls{
      "--cert=" + dir + "/node.pem", "--key=" + dir + "/node.key", "--cacert=" + dir + "/ca.pem"};
  const std::string agent_tls = ",master_cert=" + dir + "/node.pem,master_key=" + dir +
                                "/node.key,master_cacert=" + dir + "/ca.pem";
  EtcdCluster etcd(1);
  auto first = Replica(etcd, "tls", master_tls);
  REQUIRE(first->WaitForStderr("serving on", 1, 10s));
  auto standby = Replica(etcd, "tls", master_tls);
  std::vector<std::unique_ptr<Subprocess>> agents;
  for (int i = 0; i < 2; ++i) {
    agents.push_back(
        ChildAgent(EtcdJob(etcd, "tlsjob", "2", {"--rdzv_conf=master_service=tls" + agent_tls}),
                   {"--ready", "--sleep=8"}));
  }
  for (auto& agent : agents) REQUIRE(agent->WaitForStdout("ready rank=", 1, 30s));
  ProcessResult status = mxrun::testing::Run(
      {MXRUN_BIN, "status", "--rdzv_backend=etcd", "--rdzv_endpoint=" + etcd.Endpoints(),
       "--rdzv_conf=master_service=tls" + agent_tls},
      {}, 20s);
  INFO(status.out << status.err);
  CHECK(status.exit_code == 0);
  CHECK_THAT(status.out, Catch::Contains("run tlsjob: running, round 0"));
  // Without the master's certificates: refused, and told what to give.
  ProcessResult plain = mxrun::testing::Run(
      mxrun::testing::MxrunWithChild(
          EtcdJob(etcd, "plainjob", "1", {"--rdzv_conf=master_service=tls,join_timeout=3"}), {}),
      {}, 60s);
  CHECK(plain.exit_code == 3);
  CHECK_THAT(plain.err, Catch::Contains("master_cert=,master_key=,master_cacert="));
  REQUIRE(kill(first->pid(), SIGKILL) == 0);
  first->Wait(10s);
  REQUIRE(standby->WaitForStderr("serving on", 1, 10s));
  for (auto& agent : agents) CheckNoRestarts(agent->Wait(60s));
}
