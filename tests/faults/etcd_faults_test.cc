// The fault catalogue's rows for the etcd rendezvous (tests/faults/catalogue.h): the master's host,
// an etcd member and the etcd leader lost, each under real agents on a real etcd cluster the test
// starts (tests/etcd_cluster.h), compared with its ground truth.

#include <catch2/catch.hpp>

#include <signal.h>

#include <memory>
#include <string>
#include <vector>

#include "agent/process/descendants.h"
#include "tests/etcd_cluster.h"
#include "tests/faults/catalogue_job.h"
#include "tests/subprocess.h"

using namespace std::chrono_literals;
using mxrun::faults::Mismatch;
using mxrun::faults::Observe;
using mxrun::faults::Row;
using mxrun::testing::Describe;
using mxrun::testing::EtcdCluster;
using mxrun::testing::ProcessResult;
using mxrun::testing::Subprocess;

namespace {

// `count` agents of etcd job `id` with `nnodes`, one test_child worker each with `child`.
std::vector<std::unique_ptr<Subprocess>> EtcdAgents(const EtcdCluster& etcd, const std::string& id,
                                                    const std::string& nnodes, int count,
                                                    const std::vector<std::string>& child) {
  std::vector<std::unique_ptr<Subprocess>> agents;
  for (int i = 0; i < count; ++i) {
    agents.push_back(std::make_unique<Subprocess>(mxrun::testing::MxrunWithChild(
        {"--rdzv_backend=etcd", "--rdzv_endpoint=" + etcd.Endpoints(), "--rdzv_id=" + id,
         "--nnodes=" + nnodes, "--nproc_per_node=1", "--rdzv_conf=last_call_timeout=2"},
        child)));
  }
  for (auto& agent : agents) REQUIRE(agent->WaitForStdout("ready rank=", 1, 60s));
  return agents;
}

void CheckEtcdRow(std::string_view id, const ProcessResult& r) {
  INFO(Describe(r));
  CHECK(Mismatch(Row(id), Observe(r)) == "");
}

}  // namespace

TEST_CASE("fault 15 master-host-lost: the node hosting the elected master lost (etcd)",
          "[faults]") {
  EtcdCluster etcd(1);
  auto agents =
      EtcdAgents(etcd, "cat-host", "2:3", 3, {"--ready", "--sleep=4", "--sleep-if-world=3"});
  int host = -1;
  for (int i = 0; i < 3 && host < 0; ++i) {
    if (agents[i]->WaitForStderr("serving on", 1, 100ms)) host = i;
  }
  REQUIRE(host >= 0);
  // The node's death: its agent and its worker, SIGKILL, by pid.
  const std::vector<pid_t> workers = mxrun::ListDescendants(agents[host]->pid(), {});
  REQUIRE(::kill(agents[host]->pid(), SIGKILL) == 0);
  for (pid_t pid : workers) ::kill(pid, SIGKILL);
  agents[host]->Wait(10s);
  for (int i = 0; i < 3; ++i) {
    if (i != host) CheckEtcdRow("master-host-lost", agents[i]->Wait(60s));
  }
}

TEST_CASE("fault 16 etcd-member-lost: an etcd member (not the leader) lost", "[faults]") {
  EtcdCluster etcd(3);
  auto agents = EtcdAgents(etcd, "cat-member", "2", 2, {"--ready", "--sleep=5"});
  const int leader = etcd.LeaderIndex();
  REQUIRE(leader >= 0);
  etcd.Kill((leader + 1) % 3);
  for (auto& agent : agents) CheckEtcdRow("etcd-member-lost", agent->Wait(60s));
}

TEST_CASE("fault 17 etcd-leader-lost: the etcd leader lost", "[faults]") {
  EtcdCluster etcd(3);
  auto agents = EtcdAgents(etcd, "cat-leader", "2", 2, {"--ready", "--sleep=5"});
  const int leader = etcd.LeaderIndex();
  REQUIRE(leader >= 0);
  etcd.Kill(leader);
  for (auto& agent : agents) CheckEtcdRow("etcd-leader-lost", agent->Wait(60s));
}
