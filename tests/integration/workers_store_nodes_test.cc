// The workers' store in a job of several nodes (agent/store/workers_store_rendezvous.h): node rank
// 0's agent hosts each round's store on the address and port it joined with, the master tells
// every node so, and when that node is lost the next round's node rank 0 hosts the next store.
// Real agents on a real master, real PyTorch workers (init_process_group and an all_reduce).

#include <catch2/catch.hpp>

#include <signal.h>

#include <chrono>
#include <fstream>
#include <map>
#include <memory>
#include <regex>
#include <string>
#include <vector>

#include "tests/master.h"
#include "tests/python_workers.h"
#include "tests/subprocess.h"
#include "tests/temp_dir.h"
#include "tests/trainer_runs.h"

using namespace std::chrono_literals;
using mxrun::testing::Describe;
using mxrun::testing::Master;
using mxrun::testing::ProcessResult;
using mxrun::testing::PythonWorkerEnv;
using mxrun::testing::Subprocess;
using mxrun::testing::TempDir;

namespace {

// Global rank 0 comes 2 s late to init_process_group (the others' clients meet node rank 0's
// agent's store meanwhile), one all_reduce, then a line saying what the rank saw. In a group of
// more than one rank it then keeps reducing, for at most 60 s, until a peer is lost.
constexpr const char* kScript = R"(import datetime, os, time
import torch, torch.distributed as dist
if os.environ["RANK"] == "0" and os.environ["TORCHELASTIC_RESTART_COUNT"] == "0":
    time.sleep(2)
dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
t = torch.ones(1)
dist.all_reduce(t)
print(f"rank {os.environ['RANK']}: a group of {int(t.item())}, the agent's store "
      f"{os.environ['TORCHELASTIC_USE_AGENT_STORE']} at {os.environ['MASTER_ADDR']}:"
      f"{os.environ['MASTER_PORT']}", flush=True)
if dist.get_world_size() > 1 and os.environ.get("KEEP_REDUCING") == "1":
    for _ in range(600):
        dist.all_reduce(t)
        time.sleep(0.1)
dist.destroy_process_group()
)";

std::string WriteScript(const TempDir& dir) {
  const std::string path = dir.path() + "/group.py";
  std::ofstream(path) << kScript;
  return path;
}

std::vector<std::string> Node(const Master& master, const std::string& id,
                              const std::string& nnodes, int node_rank,
                              const std::string& workers_store, const std::string& script) {
  return {MXRUN_BIN,
          "--rdzv_backend=c10d",
          "--rdzv_endpoint=" + master.endpoint(),
          "--rdzv_id=" + id,
          "--nnodes=" + nnodes,
          "--node_rank=" + std::to_string(node_rank),
          "--rdzv_conf=last_call_timeout=10",
          "--nproc_per_node=1",
          "--max_restarts=1",
          "--workers_store=" + workers_store,
          script};
}

// "rank R: a group of N, the agent's store S at A:P" -> its fields, in order of appearance.
struct GroupLine {
  int rank = -1, size = 0;
  std::string agent_store, address;
};
std::vector<GroupLine> GroupLines(const std::string& out) {
  std::vector<GroupLine> lines;
  const std::regex line(
      "rank ([0-9]+): a group of ([0-9]+), the agent's store ([A-Za-z]+) at (\\S+)");
  for (auto it = std::sregex_iterator(out.begin(), out.end(), line); it != std::sregex_iterator();
       ++it) {
    lines.push_back({std::stoi((*it)[1]), std::stoi((*it)[2]), (*it)[3], (*it)[4]});
  }
  return lines;
}

}  // namespace

TEST_CASE(
    "a job of two nodes: node rank 0's agent hosts the workers' store for both, or global "
    "rank 0 does when node rank 0 says --workers_store=rank0",
    "[store][integration][multinode]") {
  TempDir dir;
  const std::string script = WriteScript(dir);
  // Node rank 0's choice is the job's; node 1 says the other one.
  for (const std::string store : {"agent", "rank0"}) {
    INFO("node rank 0: --workers_store=" << store);
    Master master;
    const std::string other = store == "agent" ? "rank0" : "agent";
    Subprocess node0(Node(master, "store-" + store, "2", 0, store, script), PythonWorkerEnv());
    Subprocess node1(Node(master, "store-" + store, "2", 1, other, script), PythonWorkerEnv());
    ProcessResult r0 = node0.Wait(120s);
    ProcessResult r1 = node1.Wait(120s);
    INFO("node 0:\n" << Describe(r0) << "\nnode 1:\n" << Describe(r1));
    REQUIRE(r0.exit_code == 0);
    REQUIRE(r1.exit_code == 0);
    const auto lines0 = GroupLines(r0.out), lines1 = GroupLines(r1.out);
    REQUIRE(lines0.size() == 1);
    REQUIRE(lines1.size() == 1);
    CHECK(lines0[0].rank == 0);
    CHECK(lines1[0].rank == 1);
    for (const GroupLine& line : {lines0[0], lines1[0]}) {
      CHECK(line.size == 2);
      CHECK(line.agent_store == (store == "agent" ? "True" : "False"));
    }
    CHECK(lines0[0].address == lines1[0].address);  // one store for the job
    if (store == "agent") {
      CHECK_THAT(r0.err, Catch::Contains("the workers' store in node rank 0's agent"));
    }
  }
}

TEST_CASE("node rank 0 lost: the next round's node rank 0 hosts the next workers' store",
          "[store][integration][multinode]") {
  TempDir dir;
  const std::string script = WriteScript(dir);
  Master master;
  std::map<std::string, std::string> env = PythonWorkerEnv();
  env["KEEP_REDUCING"] = "1";
  Subprocess node0(Node(master, "store-lost", "1:2", 0, "agent", script), env);
  Subprocess node1(Node(master, "store-lost", "1:2", 1, "agent", script), env);
  REQUIRE(node1.WaitForStdout("rank 1: a group of 2", 1, 120s));
  // Node 0 lost as a host is: its agent and its worker SIGKILLed at once.
  const pid_t worker0 = mxrun::testing::WorkerOfRank(node0.pid(), 0);
  REQUIRE(worker0 > 0);
  REQUIRE(::kill(node0.pid(), SIGKILL) == 0);
  REQUIRE(::kill(worker0, SIGKILL) == 0);
  node0.Wait(10s);
  ProcessResult r1 = node1.Wait(120s);
  INFO("node 1:\n" << Describe(r1));
  REQUIRE(r1.exit_code == 0);
  const auto lines = GroupLines(r1.out);
  REQUIRE(lines.size() == 2);
  CHECK(lines[0].size == 2);
  CHECK(lines[1].rank == 0);  // node 1 is node rank 0 of the next round, alone
  CHECK(lines[1].size == 1);
  CHECK(lines[1].agent_store == "True");
  CHECK(lines[1].address != lines[0].address);  // its own agent's store, not the lost node's
}
