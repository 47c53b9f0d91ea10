// Multi-node behaviour with real agent processes on 127.0.0.1: static and dynamic rendezvous, node
// death, late joiners, worker failures across nodes, the restart budget, an unreachable master, the
// token, and a real PyTorch Gloo job across two "nodes". Every wait is bounded.

#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <memory>

#include "nlohmann/json.hpp"
#include "rendezvous/net.h"
#include "tests/fake_nvml.h"
#include "tests/master.h"
#include "tests/subprocess.h"

using namespace std::chrono_literals;
using mxrun::testing::CountOccurrences;
using mxrun::testing::IntsAfter;
using mxrun::testing::Master;
using mxrun::testing::MasterOptions;
using mxrun::testing::ProcessResult;
using mxrun::testing::ReadFile;
using mxrun::testing::Subprocess;
using mxrun::testing::TempDir;

namespace {

const std::string kMxrun = MXRUN_BIN;

std::vector<std::string> Agent(std::vector<std::string> flags, std::vector<std::string> child) {
  return mxrun::testing::MxrunWithChild(flags, child);
}

std::vector<std::string> Dynamic(const std::string& endpoint, const std::string& id,
                                 const std::string& nnodes, std::vector<std::string> more = {}) {
  std::vector<std::string> flags{"--rdzv_backend=c10d", "--rdzv_endpoint=" + endpoint,
                                 "--rdzv_id=" + id, "--nnodes=" + nnodes};
  flags.insert(flags.end(), more.begin(), more.end());
  return flags;
}

// One node of a static 2-node job x 2 workers whose master listens on `port`.
std::unique_ptr<Subprocess> StaticNode(const std::string& port, int rank,
                                       std::vector<std::string> more,
                                       std::vector<std::string> child) {
  std::vector<std::string> flags{"--nnodes=2", "--node_rank=" + std::to_string(rank),
                                 "--master_port=" + port, "--nproc_per_node=2"};
  flags.insert(flags.end(), more.begin(), more.end());
  return std::make_unique<Subprocess>(Agent(flags, child));
}

int FreePort() {
  // Bind-then-close gives a port nobody listens on right after (tests never guess ports).
  absl::StatusOr<int> port = mxrun::PickFreePort("127.0.0.1");
  REQUIRE(port.ok());
  return *port;
}

}  // namespace

TEST_CASE("static rendezvous: 2 nodes x 2 workers get global ranks by node rank", "[multinode]") {
  const std::string port = std::to_string(FreePort());
  std::vector<std::unique_ptr<Subprocess>> nodes;
  for (int rank : {1, 0}) {  // node 1 starts first: it waits for its master
    nodes.push_back(StaticNode(port, rank, {}, {"--ready"}));
  }
  ProcessResult n1 = nodes[0]->Wait(60s);
  ProcessResult n0 = nodes[1]->Wait(60s);
  INFO(n0.err << n1.err);
  CHECK(n0.exit_code == 0);
  CHECK(n1.exit_code == 0);
  CHECK_THAT(n0.out,
             Catch::Contains("[n0 r0] ready rank=0") && Catch::Contains("[n0 r1] ready rank=1"));
  CHECK_THAT(n1.out,
             Catch::Contains("[n1 r2] ready rank=2") && Catch::Contains("[n1 r3] ready rank=3"));
  CHECK(IntsAfter(n0.out + n1.out, "world") == std::vector<int>(4, 4));
}

TEST_CASE("dynamic rendezvous: 3 agents join a 2:3 job", "[multinode]") {
  Master master;
  std::vector<std::unique_ptr<Subprocess>> agents;
  for (int i = 0; i < 3; ++i) {
    agents.push_back(std::make_unique<Subprocess>(
        Agent(Dynamic(master.endpoint(), "dyn3", "2:3", {"--rdzv_conf=last_call_timeout=10"}),
              {"--ready"})));
  }
  std::string all;
  for (auto& agent : agents) {
    ProcessResult r = agent->Wait(60s);
    INFO(r.err);
    CHECK(r.exit_code == 0);
    all += r.out;
  }
  CHECK(IntsAfter(all, "world") == std::vector<int>(3, 3));
  std::vector<int> ranks = IntsAfter(all, "ready rank");
  std::sort(ranks.begin(), ranks.end());
  CHECK(ranks == std::vector<int>{0, 1, 2});
}

TEST_CASE("an agent killed with SIGKILL: survivors re-form with a smaller world", "[multinode]") {
  Master master;
  std::vector<std::unique_ptr<Subprocess>> agents;
  for (int i = 0; i < 3; ++i) {
    agents.push_back(std::make_unique<Subprocess>(
        Agent(Dynamic(master.endpoint(), "kill1", "2:3", {"--rdzv_conf=last_call_timeout=10"}),
              {"--ready", "--sleep=60", "--sleep-if-world=3"})));
  }
  for (auto& agent : agents) REQUIRE(agent->WaitForStdout("world=3", 1, 30s));
  kill(agents[2]->pid(), SIGKILL);
  for (int i = 0; i < 2; ++i) {
    ProcessResult r = agents[i]->Wait(30s);
    INFO(r.err);
    CHECK(r.exit_code == 0);
    CHECK_THAT(r.err, Catch::Contains("left (stream closed)"));
    CHECK(CountOccurrences(r.out, "world=2") == 1);
    CHECK(CountOccurrences(r.out, "attempt=0") == 2);  // re-formed without spending the budget
  }
}

TEST_CASE("a stop signal while the group re-forms says how the workers stopped for it ended",
          "[multinode]") {
  // Under scancel one node's agent often leaves first: the others stop their workers to re-form,
  // then get their own SIGTERM while waiting for the next round. Their line names the ranks.
  Master master;
  std::vector<std::unique_ptr<Subprocess>> agents;
  for (int i = 0; i < 2; ++i) {
    agents.push_back(std::make_unique<Subprocess>(
        Agent(Dynamic(master.endpoint(), "cancel-reform", "2", {"--nproc_per_node=2"}),
              {"--ready", "--sleep=60"})));
  }
  for (auto& agent : agents) REQUIRE(agent->WaitForStdout("world=4", 2, 30s));
  kill(agents[1]->pid(), SIGKILL);
  REQUIRE(agents[0]->WaitForStderr("re-forming the worker group", 1, 30s));
  kill(agents[0]->pid(), SIGTERM);
  ProcessResult r = agents[0]->Wait(30s);
  INFO(r.err);
  CHECK(r.exit_code == 143);
  const size_t at = r.err.find("cancelled by SIGTERM");
  REQUIRE(at != std::string::npos);
  CHECK_THAT(r.err.substr(at, r.err.find('\n', at) - at),
             Catch::Matches("cancelled by SIGTERM: ranks (0-1|2-3) [^;]*\\(stopped before the "
                            "signal, as the group re-formed\\); exit code 143"));
}

TEST_CASE(
    "under a manager, a node whose master's host was cancelled first waits for its own "
    "signal and reports a cancellation, not a rendezvous failure",
    "[multinode]") {
  // systemd's stop and Slurm's scancel signal every node: node 0, which hosts the master, may go
  // first, and node 1 sees its rendezvous fail a moment before its own SIGTERM comes.
  const std::string port = std::to_string(FreePort());
  const std::map<std::string, std::string> systemd{{"INVOCATION_ID", "0123456789abcdef"}};
  auto node = [&](int rank) {
    return std::make_unique<Subprocess>(Agent({"--nnodes=2", "--node_rank=" + std::to_string(rank),
                                               "--master_port=" + port, "--nproc_per_node=2"},
                                              {"--ready", "--sleep=60"}),
                                        systemd);
  };
  auto n0 = node(0);
  auto n1 = node(1);
  REQUIRE(n0->WaitForStdout("ready rank", 2, 30s));
  REQUIRE(n1->WaitForStdout("ready rank", 2, 30s));
  kill(n0->pid(), SIGTERM);
  REQUIRE(n1->WaitForStderr("waiting up to 1 s for mxrun's own stop signal", 1, 30s));
  kill(n1->pid(), SIGTERM);
  ProcessResult r1 = n1->Wait(30s);
  ProcessResult r0 = n0->Wait(30s);
  INFO(r0.err << "\n----\n" << r1.err);
  CHECK(r0.exit_code == 143);
  CHECK(r1.exit_code == 143);
  CHECK_THAT(r1.err, Catch::Contains("cancelled by SIGTERM: ranks 2-3"));
  CHECK_THAT(r1.err, !Catch::Contains("rendezvous failed:"));
}

TEST_CASE("a late agent is admitted: the group re-forms to the larger world", "[multinode]") {
  Master master;
  std::vector<std::unique_ptr<Subprocess>> agents;
  for (int i = 0; i < 2; ++i) {
    agents.push_back(std::make_unique<Subprocess>(
        Agent(Dynamic(master.endpoint(), "late1", "2:3", {"--rdzv_conf=last_call_timeout=0.2"}),
              {"--ready", "--sleep=60", "--sleep-if-world=2"})));
  }
  for (auto& agent : agents) REQUIRE(agent->WaitForStdout("world=2", 1, 30s));
  agents.push_back(std::make_unique<Subprocess>(
      Agent(Dynamic(master.endpoint(), "late1", "2:3", {"--rdzv_conf=last_call_timeout=0.2"}),
            {"--ready", "--sleep=60", "--sleep-if-world=2"})));
  for (auto& agent : agents) {
    ProcessResult r = agent->Wait(30s);
    INFO(r.err);
    CHECK(r.exit_code == 0);
    CHECK(CountOccurrences(r.out, "world=3") == 1);
  }
}

TEST_CASE("a worker failure on node 1 restarts node 0's workers too", "[multinode]") {
  const std::string port = std::to_string(FreePort());
  auto node = [&](int rank) {
    return StaticNode(port, rank, {"--max_restarts=1"},
                      {"--ready", "--exit=3", "--only-rank=2", "--fail-below-attempt=1",
                       "--sleep=60", "--sleep-below-attempt=1"});
  };
  auto n0 = node(0);
  auto n1 = node(1);
  ProcessResult r0 = n0->Wait(60s);
  ProcessResult r1 = n1->Wait(60s);
  INFO(r0.err << r1.err);
  CHECK(r0.exit_code == 0);
  CHECK(r1.exit_code == 0);
  CHECK_THAT(r0.err, Catch::Contains("restarting the worker group (1 of 1 restarts)"));
  CHECK(CountOccurrences(r0.out, "attempt=1") == 2);
  CHECK(CountOccurrences(r1.out, "attempt=1") == 2);
}

TEST_CASE("an exhausted budget stops every node with the same summary", "[multinode]") {
  const std::string port = std::to_string(FreePort());
  auto node = [&](int rank) {
    return StaticNode(port, rank, {"--max_restarts=1"},
                      {"--ready", "--exit=3", "--only-rank=2", "--sleep=60"});
  };
  auto n0 = node(0);
  auto n1 = node(1);
  ProcessResult r0 = n0->Wait(60s);
  ProcessResult r1 = n1->Wait(60s);
  for (const ProcessResult* r : {&r0, &r1}) {
    INFO(r->err);
    CHECK(r->exit_code == 93);  // the same failure in both attempts: do not requeue
    CHECK_THAT(r->err, Catch::Contains("restarts spent: 1 of 1"));
    CHECK_THAT(r->err, Catch::Contains("rank       : 2 (local_rank: 0)"));
    CHECK_THAT(r->err, Catch::Contains("node rank  : 1"));
    CHECK_THAT(r->err, Catch::Contains("exit code 3"));
  }
}

TEST_CASE("an unreachable master is a rendezvous failure (exit 3) after the join timeout",
          "[multinode]") {
  const std::string endpoint = "127.0.0.1:" + std::to_string(FreePort());
  ProcessResult r = mxrun::testing::Run(
      Agent(Dynamic(endpoint, "nomaster", "2", {"--rdzv_conf=join_timeout=1,is_host=0"}), {}), {},
      30s);
  CHECK(r.exit_code == 3);
  CHECK_THAT(r.err, Catch::Contains("cannot reach the rendezvous master at " + endpoint));
}

TEST_CASE("a master with a token refuses a wrong or missing token", "[multinode]") {
  TempDir dir;
  const std::string token_file = dir.path() + "/token";
  std::ofstream(token_file) << "s3cret\n";
  Master master({.extra = {"--token_file=" + token_file}});
  for (const std::string token : {"wrong", ""}) {
    ProcessResult r = mxrun::testing::Run(
        Agent(Dynamic(master.endpoint(), "tok", "1:2", {"--rdzv_conf=join_timeout=5,is_host=0"}),
              {}),
        {{"MXRUN_RDZV_TOKEN", token}}, 30s);
    INFO(r.err);
    CHECK(r.exit_code == 3);
    CHECK_THAT(r.err, Catch::Contains("token"));
  }
  ProcessResult ok = mxrun::testing::Run(
      Agent(Dynamic(master.endpoint(), "tok", "1", {"--rdzv_conf=is_host=0"}), {"--ready"}),
      {{"MXRUN_RDZV_TOKEN", "s3cret"}}, 30s);
  INFO(ok.err);
  CHECK(ok.exit_code == 0);
}

TEST_CASE("the token stays secret: not in workers, logs, status or the master's state",
          "[multinode][secrets]") {
  TempDir dir;
  const std::string secret = "s3cret-7f3a9c";
  const std::string token_file = dir.path() + "/token";
  std::ofstream(token_file) << secret << "\n";
  const std::string state_dir = dir.path() + "/state";
  Master master({.extra = {"--token_file=" + token_file}, .state_dir = state_dir});
  ProcessResult r = mxrun::testing::Run(
      Agent(Dynamic(master.endpoint(), "secret", "1", {"--rdzv_conf=is_host=0"}),
            {"--env-out=" + dir.path()}),
      {{"MXRUN_RDZV_TOKEN", secret}}, 30s);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(ReadFile(dir.path() + "/env.0").find(secret) == std::string::npos);  // the worker's
  CHECK(ReadFile(dir.path() + "/env.0").find("MXRUN_RDZV_TOKEN") == std::string::npos);
  CHECK(r.err.find(secret) == std::string::npos);
  CHECK(r.out.find(secret) == std::string::npos);
  ProcessResult status =
      mxrun::testing::Run({kMxrun, "status", "--rdzv_endpoint=" + master.endpoint()},
                          {{"MXRUN_RDZV_TOKEN", secret}}, 20s);
  CHECK(status.exit_code == 0);
  CHECK((status.out + status.err).find(secret) == std::string::npos);
  // The token from the agents' own --rdzv_conf token_file, as the master's refusal suggests;
  // without any, refused; with a file that cannot be read, a usage error naming it.
  ProcessResult from_file =
      mxrun::testing::Run({kMxrun, "status", "--rdzv_endpoint=" + master.endpoint(),
                           "--rdzv_conf=token_file=" + token_file},
                          {}, 20s);
  INFO(from_file.err);
  CHECK(from_file.exit_code == 0);
  CHECK_THAT(from_file.out, Catch::Contains("secret"));  // the run id
  CHECK((from_file.out + from_file.err).find(secret) == std::string::npos);
  ProcessResult without = mxrun::testing::Run(
      {kMxrun, "status", "--rdzv_endpoint=" + master.endpoint(), "--timeout=2"}, {}, 20s);
  CHECK(without.exit_code == 3);
  CHECK_THAT(without.err, Catch::Contains("the master requires a token"));
  ProcessResult unreadable =
      mxrun::testing::Run({kMxrun, "status", "--rdzv_endpoint=" + master.endpoint(),
                           "--rdzv_conf=token_file=" + dir.path() + "/none"},
                          {}, 20s);
  CHECK(unreadable.exit_code == 2);
  CHECK_THAT(unreadable.err,
             Catch::Contains("--rdzv_conf token_file=" + dir.path() + "/none: cannot be read"));
  ProcessResult config = mxrun::testing::Run(
      {kMxrun, "--print-config", "--rdzv_backend=c10d", "--rdzv_endpoint=" + master.endpoint(),
       "--rdzv_conf=token_file=" + token_file, "x.py"},
      {{"MXRUN_RDZV_TOKEN", secret}}, 20s);
  CHECK(config.exit_code == 0);
  CHECK((config.out + config.err).find(secret) == std::string::npos);
  // The master's folder and file: its user's only, and no token in them.
  struct stat st {};
  REQUIRE(stat(state_dir.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0700);
  const std::string state_file = state_dir + "/state.json";
  REQUIRE(stat(state_file.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
  CHECK(ReadFile(state_file).find(secret) == std::string::npos);
  CHECK(master.StopAndOutput().find(secret) == std::string::npos);
}

TEST_CASE("a finished run refuses late joiners", "[multinode]") {
  Master master;
  ProcessResult first = mxrun::testing::Run(
      Agent(Dynamic(master.endpoint(), "done1", "1", {"--rdzv_conf=is_host=0"}), {}), {}, 30s);
  REQUIRE(first.exit_code == 0);
  ProcessResult late = mxrun::testing::Run(
      Agent(Dynamic(master.endpoint(), "done1", "1", {"--rdzv_conf=is_host=0"}), {}), {}, 30s);
  CHECK(late.exit_code == 3);
  CHECK_THAT(late.err, Catch::Contains("has already finished"));
}

TEST_CASE("PyTorch Gloo all-reduce across 2 nodes x 2 workers, also after a re-formation",
          "[multinode][pytorch]") {
  Master master;
  for (const std::string extra : {"", "--fail-once-on-rank=3"}) {
    INFO("extra: " << extra);
    std::vector<std::unique_ptr<Subprocess>> nodes;
    const std::string id = extra.empty() ? "torch1" : "torch2";
    for (int i = 0; i < 2; ++i) {
      std::vector<std::string> argv{kMxrun};
      for (const std::string& f : Dynamic(master.endpoint(), id, "2",
                                          {"--nproc_per_node=2", "--max_restarts=1",
                                           "--rdzv_conf=is_host=0", "--log_collapse_window=0"})) {
        argv.push_back(f);
      }
      argv.push_back(std::string(EXAMPLES_DIR) + "/ddp_allreduce.py");
      if (!extra.empty()) argv.push_back(extra);
      nodes.push_back(std::make_unique<Subprocess>(
          argv, std::map<std::string, std::string>{{"PYTHON_EXEC", PYTHON_BIN}}));
    }
    std::string out;
    std::string err;
    for (auto& node : nodes) {
      ProcessResult r = node->Wait(240s);
      INFO(r.out << r.err);
      CHECK(r.exit_code == 0);
      out += r.out;
      err += r.err;
    }
    const std::string attempt = extra.empty() ? "attempt=0" : "attempt=1";
    INFO(out << err);
    CHECK(CountOccurrences(out, "allreduce ok: sum=10.0 world_size=4 " + attempt) == 4);
    CHECK(CountOccurrences(out, "ddp parameters identical on every rank") == 4);
  }
}

TEST_CASE("mxrun status shows runs, rounds and members, and runs on one master stay apart",
          "[multinode]") {
  Master master;
  std::vector<std::unique_ptr<Subprocess>> agents;
  for (const std::string id : {"statA", "statA", "statB"}) {
    agents.push_back(std::make_unique<Subprocess>(
        Agent(Dynamic(master.endpoint(), id, id == "statA" ? "2" : "1",
                      {"--rdzv_conf=is_host=0",
                       "--nproc_per_node=" + std::string(id == "statA" ? "2" : "3")}),
              {"--ready", "--sleep=60"})));
  }
  REQUIRE(agents[0]->WaitForStdout("ready", 2, 30s));
  REQUIRE(agents[1]->WaitForStdout("ready", 2, 30s));
  REQUIRE(agents[2]->WaitForStdout("ready", 3, 30s));
  ProcessResult all =
      mxrun::testing::Run({kMxrun, "status", "--rdzv_endpoint=" + master.endpoint()}, {}, 20s);
  INFO(all.out << all.err);
  CHECK(all.exit_code == 0);
  CHECK_THAT(all.out, Catch::Contains("run statA: running, round 0, nodes 2:2, world size 4, "
                                      "restarts 0 of 0"));
  CHECK_THAT(all.out, Catch::Contains("run statB: running, round 0, nodes 1:1, world size 3"));
  CHECK(CountOccurrences(all.out, "running    ") == 3);  // three members, each running
  ProcessResult one = mxrun::testing::Run(
      {kMxrun, "status", "--rdzv_endpoint=" + master.endpoint(), "--rdzv_id=statB"}, {}, 20s);
  INFO(one.out << one.err);
  CHECK(one.exit_code == 0);
  CHECK_THAT(one.out, Catch::Contains("run statB: running, round 0, nodes 1:1, world size 3"));
  CHECK_THAT(one.out, !Catch::Contains("statA"));
  // Each job saw only its own world.
  CHECK(IntsAfter(agents[2]->out(), "world") == std::vector<int>(3, 3));
  for (auto& agent : agents) {
    kill(agent->pid(), SIGTERM);
    CHECK(agent->Wait(30s).exit_code == 143);
  }
  ProcessResult unreachable = mxrun::testing::Run(
      {kMxrun, "status", "--rdzv_endpoint=127.0.0.1:" + std::to_string(FreePort()), "--timeout=1"},
      {}, 20s);
  CHECK(unreachable.exit_code == 3);
}

TEST_CASE("a master killed and restarted on its state folder: the job goes on, workers start once",
          "[multinode][state_dir]") {
  TempDir dir;
  const MasterOptions options{.port = FreePort(), .state_dir = dir.path() + "/state"};
  auto master = std::make_unique<Master>(options);
  const std::string endpoint = master->endpoint();
  std::vector<std::unique_ptr<Subprocess>> agents;
  for (int i = 0; i < 2; ++i) {
    agents.push_back(std::make_unique<Subprocess>(Agent(
        Dynamic(endpoint, "durable", "2", {"--nproc_per_node=1"}), {"--ready", "--sleep=6"})));
  }
  for (auto& agent : agents) REQUIRE(agent->WaitForStdout("ready rank=", 1, 30s));
  // The round is running: the master dies without warning and comes back on the same folder.
  master->Kill();
  CHECK_THAT(ReadFile(dir.path() + "/state/state.json"),
             Catch::Contains("\"run_id\": \"durable\""));
  master = std::make_unique<Master>(options);

  std::string all;
  for (auto& agent : agents) {
    ProcessResult r = agent->Wait(60s);
    INFO(r.out << r.err);
    CHECK(r.exit_code == 0);
    CHECK(r.err.find("restarting") == std::string::npos);
    CHECK(r.err.find("re-forming") == std::string::npos);
    all += r.out;
  }
  // Each node's worker started exactly once and ran to its end.
  CHECK(mxrun::testing::CountOccurrences(all, "ready rank=") == 2);
  CHECK(IntsAfter(all, "world") == std::vector<int>(2, 2));
  // A finished job leaves no running run in the state file (which is still there).
  const std::string final_state = ReadFile(dir.path() + "/state/state.json");
  REQUIRE_FALSE(final_state.empty());
  CHECK_THAT(final_state, !Catch::Contains("\"durable\""));
}

TEST_CASE("a restarted master without the round tells agents to re-form",
          "[multinode][state_dir]") {
  TempDir dir;
  const int port = FreePort();
  auto master =
      std::make_unique<Master>(MasterOptions{.port = port, .state_dir = dir.path() + "/a"});
  const std::string endpoint = master->endpoint();
  std::vector<std::unique_ptr<Subprocess>> agents;
  for (int i = 0; i < 2; ++i) {
    agents.push_back(std::make_unique<Subprocess>(
        Agent(Dynamic(endpoint, "lost", "2", {"--nproc_per_node=1"}), {"--ready", "--sleep=3"})));
  }
  for (auto& agent : agents) REQUIRE(agent->WaitForStdout("ready rank=", 1, 30s));
  master->Kill();
  // An empty state folder: the round is unknown there.
  master = std::make_unique<Master>(MasterOptions{.port = port, .state_dir = dir.path() + "/b"});
  std::string all;
  for (auto& agent : agents) {
    ProcessResult r = agent->Wait(60s);
    INFO(r.out << r.err);
    CHECK(r.exit_code == 0);
    all += r.out + r.err;
  }
  CHECK_THAT(all, Catch::Contains("no longer knows round 0"));
  CHECK(mxrun::testing::CountOccurrences(all, "ready rank=") == 4);  // a second round ran
}

TEST_CASE("one node with c10d on localhost:0 and no --rdzv_id runs, as torchrun users write it",
          "[multinode]") {
  // PyTorch's own example scripts: port 0 is a free port on the hosting node, and the run id
  // is torchrun's default 'none'.
  ProcessResult r = mxrun::testing::Run(
      Agent({"--rdzv_backend=c10d", "--rdzv_endpoint=localhost:0", "--nproc_per_node=2"},
            {"--ready"}),
      {}, 30s);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(CountOccurrences(r.out, "world=2") == 2);
  CHECK_THAT(r.err, Catch::Contains("hosting the rendezvous master on localhost:"));
}

TEST_CASE("port 0 on a node that does not host the master is refused", "[multinode]") {
  ProcessResult r = mxrun::testing::Run(Agent({"--rdzv_backend=c10d", "--rdzv_endpoint=localhost:0",
                                               "--rdzv_conf=is_host=0", "--nnodes=2"},
                                              {}),
                                        {}, 30s);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Catch::Contains("port 0 means a free port on the node that hosts"));
}

TEST_CASE("an agent that waits for its rendezvous says so within seconds", "[multinode]") {
  // Nobody listens on the endpoint: the agent waits (up to the join timeout), not silently.
  const std::string endpoint = "127.0.0.1:" + std::to_string(FreePort());
  Subprocess agent(Agent(Dynamic(endpoint, "silent", "2", {"--rdzv_conf=is_host=0"}), {}));
  CHECK(
      agent.WaitForStderr("no round yet after 5 s: the rendezvous has not answered this "
                          "node's join (dynamic rendezvous at " +
                              endpoint,
                          1, 15s));
  kill(agent.pid(), SIGTERM);
  ProcessResult r = agent.Wait(30s);
  CHECK(r.exit_code == 128 + SIGTERM);
}

TEST_CASE("node ranks follow the network: the groups agents give and an NVLink domain from NVML",
          "[multinode][rank_order]") {
  Master master;
  TempDir dir;
  // Node C's GPU is in an NVLink domain (the fake NVML's fabric) and its group comes from the
  // environment, as a Kubernetes pod gets a label through the downward API.
  const std::string state = dir.path() + "/nvml-state";
  std::ofstream(state) << "GPU-aaaa used_mib=0 fabric=0123456789abcdef0123456789abcdef.7\n";
  const std::map<std::string, std::string> gpu{
      {"LD_LIBRARY_PATH", mxrun::testing::FakeNvmlLibraryPath()},
      {"FAKE_NVML_DEVICES", "GPU-aaaa@0000:00:03.0"},
      {"FAKE_NVML_STATE", state},
      {"MXRUN_TOPOLOGY_GROUP", "leaf1"}};
  auto node = [&](const std::string& name, std::vector<std::string> more,
                  const std::map<std::string, std::string>& env = {}) {
    more.push_back("--nproc_per_node=1");
    return std::make_unique<Subprocess>(
        Agent(Dynamic(master.endpoint(), "topo1", "3", more), {"--ready", "--sleep=30"}), env);
  };
  // Joined in the order A, B, C; host order (one machine: join order) would rank them so.
  std::vector<std::unique_ptr<Subprocess>> agents;
  agents.push_back(node("A", {"--topology_group=leaf1/x"}));
  agents.push_back(node("B", {"--topology_group=leaf0"}));
  agents.push_back(node("C", {"--rank_order=topology"}, gpu));
  for (auto& agent : agents) REQUIRE(agent->WaitForStdout("ready rank=", 1, 60s));
  // leaf0 first (B); in leaf1, C's NVLink domain ("nvl:...") before A's group x.
  CHECK(IntsAfter(agents[0]->out(), "ready rank") == std::vector<int>{2});
  CHECK(IntsAfter(agents[1]->out(), "ready rank") == std::vector<int>{0});
  CHECK(IntsAfter(agents[2]->out(), "ready rank") == std::vector<int>{1});
  // mxrun status shows each node's place.
  ProcessResult status = mxrun::testing::Run(
      {kMxrun, "status", "--rdzv_endpoint=" + master.endpoint(), "--json"}, {}, 20s);
  INFO(status.out << status.err);
  REQUIRE(status.exit_code == 0);
  std::vector<std::string> places;
  const nlohmann::json reply = nlohmann::json::parse(status.out);
  for (const nlohmann::json& m : reply["runs"][0]["members"]) {
    places.push_back(m.value("topology", ""));
  }
  CHECK(places == std::vector<std::string>{"leaf0", "leaf1/nvl:0123456789abcdef0123456789abcdef.7",
                                           "leaf1/x"});
  for (auto& agent : agents) kill(agent->pid(), SIGTERM);
  for (auto& agent : agents) agent->Wait(30s);
}

TEST_CASE(
    "a topology rank order without a place, and a bad group, are refused before anything "
    "starts",
    "[multinode][rank_order]") {
  Master master;
  ProcessResult none = mxrun::testing::Run(
      Agent(Dynamic(master.endpoint(), "topo2", "2", {"--rank_order=topology"}), {}), {}, 30s);
  CHECK(none.exit_code == 2);
  CHECK_THAT(none.err, Catch::Contains("--rank_order=topology: nothing says where this node"));
  ProcessResult bad = mxrun::testing::Run(
      Agent(Dynamic(master.endpoint(), "topo2", "2", {"--topology_group=leaf 1"}), {}), {}, 30s);
  CHECK(bad.exit_code == 2);
  CHECK_THAT(bad.err, Catch::Contains("--topology_group") && Catch::Contains("the character ' '"));
  ProcessResult order = mxrun::testing::Run(
      Agent(Dynamic(master.endpoint(), "topo2", "2", {"--rank_order=switches"}), {}), {}, 30s);
  CHECK(order.exit_code == 2);
  CHECK_THAT(order.err, Catch::Contains("auto, host or topology"));
}
