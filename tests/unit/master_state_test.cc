// Scenario tests of the rendezvous master's state machine: events in with a fake clock, messages
// out rendered as one line each, compared with the expected lines.

#include <catch2/catch.hpp>

#include "absl/strings/str_cat.h"
#include "rendezvous/master_state/master_state.h"
#include "rendezvous/master_state/master_state_file.h"

using namespace std::chrono_literals;
using mxrun::JobDesc;
using mxrun::MasterState;
using mxrun::NodeDesc;
using mxrun::ToAgent;

namespace {

std::string Render(const ToAgent& m) {
  std::string who = absl::StrCat("n", m.node, ": ");
  switch (m.kind) {
    case ToAgent::Kind::kWaiting:
      return absl::StrCat(who, "waiting ", m.nodes_waiting);
    case ToAgent::Kind::kRound:
      return absl::StrCat(who, "round ", m.round.round, " rank ", m.round.node_rank, "/",
                          m.round.num_nodes, " base ", m.round.global_rank_base, " world ",
                          m.round.world_size, " master ", m.round.master_addr, ":",
                          m.round.master_port, " restarts ", m.round.restart_count);
    case ToAgent::Kind::kStop:
      return absl::StrCat(who, "stop", m.restart ? " restart " : " ", m.restarts_spent, "/",
                          m.max_restarts, ": ", m.reason);
    case ToAgent::Kind::kPeerFinished:
      return absl::StrCat(who, "peer finished ", m.peer_host, " rank ", m.peer_node_rank, " (",
                          m.nodes_finished, "/", m.num_nodes, ")");
    case ToAgent::Kind::kFinished:
      return absl::StrCat(
          who, m.success ? "finished ok" : "finished failed",
          m.first_failure ? absl::StrCat(" rank ", m.first_failure->global_rank) : "");
    case ToAgent::Kind::kRefused:
      return absl::StrCat(who, "refused ", absl::StatusCodeToString(m.refusal.code()), ": ",
                          m.refusal.message());
    case ToAgent::Kind::kStraggler:
      return absl::StrCat(who, "round ", m.straggler_round, " ",
                          mxrun::DescribeStraggler(m.straggler));
  }
  return "?";
}

class Scenario {
 public:
  explicit Scenario(int min_nodes = 2, int max_nodes = 2, int max_restarts = 0) {
    job.min_nodes = min_nodes;
    job.max_nodes = max_nodes;
    job.max_restarts = max_restarts;
    job.timeouts.join_timeout = 60s;
    job.timeouts.last_call_timeout = 5s;
    job.timeouts.heartbeat_interval = 1s;
    job.timeouts.missed_heartbeats = 5;
    job.timeouts.finished_run_ttl = 100s;
  }

  std::vector<std::string> Join(mxrun::NodeId node, const std::string& host, int workers = 2,
                                int rank = -1, bool hosts_master = false) {
    NodeDesc d;
    d.host = host;
    d.address = "a" + std::to_string(node);
    d.local_world_size = workers;
    d.requested_rank = rank;
    d.hosts_master = hosts_master;
    d.master_port = 5000 + static_cast<int>(node);
    d.agent_id = "agent-" + host;
    return Lines(state.Join(now, node, run_id, d, job));
  }
  std::vector<std::string> Resume(mxrun::NodeId node, const std::string& host, int round) {
    NodeDesc d;
    d.host = host;
    d.agent_id = "agent-" + host;
    d.local_world_size = 2;
    return Lines(state.Resume(now, node, run_id, d, round));
  }
  std::vector<std::string> Fail(mxrun::NodeId node, int round, int rank) {
    mxrun::WorkerFailure f;
    f.global_rank = rank;
    f.host = "h";
    f.exit_code = 3;
    return Lines(state.ReportFailure(now, node, round, f));
  }
  std::vector<std::string> Succeed(mxrun::NodeId node, int round) {
    return Lines(state.ReportSucceeded(now, node, round));
  }
  std::vector<std::string> Gone(mxrun::NodeId node) {
    return Lines(state.NodeGone(now, node, "stream closed"));
  }
  std::vector<std::string> Advance(std::chrono::milliseconds d) {
    now += d;
    return Lines(state.Tick(now));
  }
  void Beat(std::initializer_list<mxrun::NodeId> nodes) {
    for (auto n : nodes) state.Heartbeat(now, n);
  }
  static std::vector<std::string> Lines(const MasterState::Out& out) {
    std::vector<std::string> lines;
    for (const ToAgent& m : out) lines.push_back(Render(m));
    return lines;
  }

  MasterState state;
  JobDesc job;
  std::string run_id = "job1";
  MasterState::Time now{};
};

using Lines = std::vector<std::string>;

}  // namespace

TEST_CASE("natural order of host names", "[master]") {
  CHECK(mxrun::NaturalLess("node7", "node66"));
  CHECK_FALSE(mxrun::NaturalLess("node66", "node7"));
  CHECK(mxrun::NaturalLess("gpu2-a", "gpu10-a"));
  CHECK(mxrun::NaturalLess("a", "b"));
  CHECK(mxrun::NaturalLess("node", "node1"));
  CHECK(mxrun::NaturalLess("n007", "n8"));
  CHECK(mxrun::NaturalLess("n99999999999999999999998", "n99999999999999999999999"));
}

TEST_CASE("a round closes at once when max nodes joined", "[master]") {
  Scenario s(2, 2);
  CHECK(s.Join(1, "node1") == Lines{"n1: waiting 1"});
  CHECK(s.Join(2, "node2", 3) ==
        Lines{"n1: round 0 rank 0/2 base 0 world 5 master a1:5001 restarts 0",
              "n2: round 0 rank 1/2 base 2 world 5 master a1:5001 restarts 0"});
}

TEST_CASE("a round says the agent's store to every node when node rank 0's agent hosts it",
          "[master]") {
  // Node rank 0's agent decides (it hosts the store on its address and port); another node's
  // choice does not matter, as its agent hosts nothing unless it gets node rank 0.
  for (const bool first_hosts : {true, false}) {
    INFO("node rank 0's agent hosts the workers' store: " << first_hosts);
    Scenario s(2, 2);
    auto desc = [](const std::string& host, int port, bool hosts) {
      NodeDesc d;
      d.host = host;
      d.address = "a-" + host;
      d.local_world_size = 2;
      d.master_port = port;
      d.agent_id = "agent-" + host;
      d.hosts_workers_store = hosts;
      return d;
    };
    s.state.Join(s.now, 1, s.run_id, desc("node1", 5001, first_hosts), s.job);
    const MasterState::Out out =
        s.state.Join(s.now, 2, s.run_id, desc("node2", 5002, !first_hosts), s.job);
    REQUIRE(out.size() == 2);
    for (const ToAgent& m : out) {
      REQUIRE(m.kind == ToAgent::Kind::kRound);
      CHECK(m.round.master_addr == "a-node1");
      CHECK(m.round.master_port == 5001);
      CHECK(m.round.use_agent_store == first_hosts);
    }
    // A durable master keeps it: a restored one gives the same rounds.
    auto runs = mxrun::PersistedRunsFromJson(mxrun::PersistedRunsToJson(s.state.Persisted()));
    REQUIRE(runs.ok());
    REQUIRE(runs->size() == 1);
    REQUIRE(runs->front().members.size() == 2);
    for (const auto& member : runs->front().members) {
      CHECK(member.desc.hosts_workers_store ==
            (member.desc.host == "node1" ? first_hosts : !first_hosts));
    }
  }
}

TEST_CASE("at min nodes the last call window opens and closes the round", "[master]") {
  Scenario s(2, 3);
  s.Join(1, "node1");
  CHECK(s.Join(2, "node2") == Lines{"n2: waiting 2"});
  s.Beat({1, 2});
  CHECK(s.Advance(4s).empty());
  s.Beat({1, 2});
  CHECK(s.Advance(1s) == Lines{"n1: round 0 rank 0/2 base 0 world 4 master a1:5001 restarts 0",
                               "n2: round 0 rank 1/2 base 2 world 4 master a1:5001 restarts 0"});
}

TEST_CASE("ranks: requested rank, then master host, then natural host order, then join order",
          "[master]") {
  Scenario s(4, 4);
  s.Join(1, "node66");
  s.Join(2, "node7");
  s.Join(3, "zeta", 2, /*rank=*/1);
  Lines out = s.Join(4, "node100", 2, -1, /*hosts_master=*/true);
  CHECK(out == Lines{"n4: round 0 rank 0/4 base 0 world 8 master a4:5004 restarts 0",
                     "n3: round 0 rank 1/4 base 2 world 8 master a4:5004 restarts 0",
                     "n2: round 0 rank 2/4 base 4 world 8 master a4:5004 restarts 0",
                     "n1: round 0 rank 3/4 base 6 world 8 master a4:5004 restarts 0"});
}

TEST_CASE("same host name: join order decides", "[master]") {
  Scenario s(2, 2);
  s.Join(7, "same");
  Lines out = s.Join(3, "same");
  CHECK(out[0] == "n7: round 0 rank 0/2 base 0 world 4 master a7:5007 restarts 0");
}

TEST_CASE("a worker failure restarts every node and spends the budget once", "[master]") {
  Scenario s(2, 2, /*max_restarts=*/1);
  s.Join(1, "node1");
  s.Join(2, "node2");
  CHECK(s.Fail(2, 0, 3) == Lines{"n1: stop restart 1/1: worker rank 3 on h failed (exit code 3)",
                                 "n2: stop restart 1/1: worker rank 3 on h failed (exit code 3)"});
  CHECK(s.Fail(1, 0, 0).empty());  // a stale report from the stopped round changes nothing
  CHECK(s.Join(1, "node1") == Lines{"n1: waiting 1"});
  CHECK(s.Join(2, "node2") ==
        Lines{"n1: round 1 rank 0/2 base 0 world 4 master a1:5001 restarts 1",
              "n2: round 1 rank 1/2 base 2 world 4 master a1:5001 restarts 1"});
  CHECK(s.Fail(1, 1, 1) == Lines{"n1: finished failed rank 1", "n2: finished failed rank 1"});
  CHECK(s.Join(3, "late") ==
        Lines{"n3: refused FAILED_PRECONDITION: run 'job1' has already finished (failed); start "
              "a new job with another --rdzv_id"});
}

TEST_CASE("success needs every member, and an early finisher waits", "[master]") {
  Scenario s(2, 2);
  s.Join(1, "node1");
  s.Join(2, "node2");
  // The member still running learns of it: its exit barrier starts.
  CHECK(s.Succeed(1, 0) == Lines{"n2: peer finished node1 rank 0 (1/2)"});
  s.Beat({1, 2});
  CHECK(s.Advance(3s).empty());
  CHECK(s.Succeed(2, 0) == Lines{"n1: finished ok", "n2: finished ok"});
}

TEST_CASE("a vanished peer is never reported as success", "[master]") {
  Scenario s(2, 2);
  s.Join(1, "node1");
  s.Join(2, "node2");
  s.Succeed(1, 0);
  CHECK(s.Gone(2) == Lines{"n1: stop 0/0: node2 left (stream closed)"});
  CHECK(s.Join(1, "node1") == Lines{"n1: waiting 1"});  // below min: waits, no success
}

TEST_CASE("a dead node: survivors re-form at once without spending the budget", "[master]") {
  Scenario s(2, 3, 0);
  s.Join(1, "node1");
  s.Join(2, "node2");
  s.Join(3, "node3");
  CHECK(s.Gone(3) == Lines{"n1: stop 0/0: node3 left (stream closed)",
                           "n2: stop 0/0: node3 left (stream closed)"});
  CHECK(s.Join(2, "node2") == Lines{"n2: waiting 1"});
  // Every survivor is back and min is met: no last call when re-forming.
  CHECK(s.Join(1, "node1") ==
        Lines{"n1: round 1 rank 0/2 base 0 world 4 master a1:5001 restarts 0",
              "n2: round 1 rank 1/2 base 2 world 4 master a1:5001 restarts 0"});
}

TEST_CASE("a silent node is declared dead when its lease expires (master's clock)", "[master]") {
  Scenario s(1, 2);
  s.Join(1, "node1");
  s.Join(2, "node2");
  for (int i = 0; i < 4; ++i) {
    s.Beat({1, 2});
    CHECK(s.Advance(1s).empty());
  }
  s.Beat({1});  // node2 goes silent
  CHECK(s.Advance(4s).empty());
  s.Beat({1});
  CHECK(s.Advance(2s) == Lines{"n1: stop 0/0: node2 left (no heartbeat for 5 s)"});
}

TEST_CASE("leases end on time although ticks look at the nodes only once one can have ended",
          "[master]") {
  Scenario s(3, 3);
  CHECK(s.Join(1, "node1") == Lines{"n1: waiting 1"});
  CHECK(s.Advance(3s).empty());
  CHECK(s.Join(2, "node2") == Lines{"n2: waiting 2"});
  s.Beat({2});
  s.Advance(2100ms);  // node1's lease has ended (5.1 s), node2's has not (2.1 s)
  CHECK(s.Advance(2s).empty());
  CHECK(s.Join(3, "node3") == Lines{"n3: waiting 2"});  // node2 still counts
  s.Advance(1s);                                        // node2 silent for 5.1 s: gone
  // Every node gone, and the run with them: a later joiner starts a run whose leases are watched.
  CHECK(s.Advance(10s).empty());
  CHECK(s.Join(4, "node4") == Lines{"n4: waiting 1"});
  CHECK(s.Advance(5100ms).empty());
  CHECK(s.Join(5, "node5") == Lines{"n5: waiting 1"});  // node4 was gone, not paired with node5
}

TEST_CASE("a late joiner is admitted while the group is below max", "[master]") {
  Scenario s(2, 3);
  s.Join(1, "node1");
  s.Join(2, "node2");
  s.Beat({1, 2});
  s.Advance(5s);  // last call: round 0 with 2 nodes
  CHECK(s.Join(3, "node3") == Lines{"n1: stop 0/0: node3 joined; re-forming the group to admit it",
                                    "n2: stop 0/0: node3 joined; re-forming the group to admit it",
                                    "n3: waiting 1"});
  s.Join(1, "node1");
  CHECK(s.Join(2, "node2") ==
        Lines{"n1: round 1 rank 0/3 base 0 world 6 master a1:5001 restarts 0",
              "n2: round 1 rank 1/3 base 2 world 6 master a1:5001 restarts 0",
              "n3: round 1 rank 2/3 base 4 world 6 master a1:5001 restarts 0"});
}

TEST_CASE("a joiner beyond max waits without disturbing the group", "[master]") {
  Scenario s(1, 1);
  s.Join(1, "node1");
  CHECK(s.Join(2, "node2") == Lines{"n2: waiting 1"});
}

TEST_CASE("below min for join_timeout: every waiting node is refused", "[master]") {
  Scenario s(3, 3);
  s.Join(1, "node1");
  s.Join(2, "node2");
  for (int i = 0; i < 59; ++i) {
    s.Beat({1, 2});
    CHECK(s.Advance(1s).empty());
  }
  s.Beat({1, 2});
  Lines out = s.Advance(1s);
  REQUIRE(out.size() == 2);
  CHECK_THAT(out[0], Catch::StartsWith("n1: refused DEADLINE_EXCEEDED: rendezvous of run 'job1' "
                                       "timed out after 60 s waiting for nodes: 2 joined, at "
                                       "least 3 needed"));
}

TEST_CASE("joins are validated and do not disturb the run", "[master]") {
  Scenario s(2, 2);
  s.Join(1, "node1", 2, 0);
  CHECK_THAT(s.Join(2, "node2", 2, 0)[0],
             Catch::Contains("refused ALREADY_EXISTS: node rank 0 is already taken by node1"));
  CHECK_THAT(s.Join(3, "node3", 0)[0], Catch::Contains("refused INVALID_ARGUMENT: local world"));
  CHECK_THAT(s.Join(4, "node4", 2, 5)[0], Catch::Contains("node rank 5 is not valid"));
  s.job.max_nodes = 3;
  CHECK_THAT(s.Join(5, "node5")[0],
             Catch::Contains("started with --nnodes=2:3 --max_restarts=0 but run 'job1' has "
                             "--nnodes=2 --max_restarts=0"));
  s.job.max_nodes = 2;
  s.run_id = "bad id!";
  CHECK_THAT(s.Join(6, "node6")[0], Catch::Contains("run id 'bad id!' is not valid"));
  s.run_id = "job1";
  CHECK(s.Join(7, "node7", 2, 1).size() == 2);  // the run still forms with valid nodes
}

TEST_CASE("two runs on one master never see each other", "[master]") {
  Scenario s(1, 1, 1);
  s.Join(1, "a");
  s.run_id = "job2";
  Lines out = s.Join(2, "b");
  CHECK(out == Lines{"n2: round 0 rank 0/1 base 0 world 2 master a2:5002 restarts 0"});
  CHECK(s.Fail(1, 0, 0) == Lines{"n1: stop restart 1/1: worker rank 0 on h failed (exit code 3)"});
  CHECK(s.state.Snapshot(s.now, "job2")[0].restarts_spent == 0);
  CHECK(s.state.Snapshot(s.now, "job1")[0].restarts_spent == 1);
}

TEST_CASE("finished runs are forgotten after their time to live", "[master]") {
  Scenario s(1, 1);
  s.Join(1, "a");
  s.Succeed(1, 0);
  CHECK(s.state.run_count() == 1);
  s.Advance(101s);
  CHECK(s.state.run_count() == 0);
}

TEST_CASE("status snapshot shows members with their ranks", "[master]") {
  Scenario s(2, 3);
  s.Join(1, "node1");
  s.Join(2, "node2");
  s.Beat({1, 2});
  s.Advance(5s);
  s.Join(3, "node3");
  auto snaps = s.state.Snapshot(s.now, "");
  REQUIRE(snaps.size() == 1);
  CHECK(snaps[0].phase == "waiting");
  CHECK(snaps[0].round == 0);
  REQUIRE(snaps[0].members.size() == 3);
}

TEST_CASE("a restored master re-attaches agents to their running round", "[master][state_dir]") {
  Scenario before;
  before.Join(1, "h1");
  before.Join(2, "h2");
  REQUIRE(before.state.Persisted().size() == 1);
  // Through the state file's JSON, as across a process restart.
  auto runs = mxrun::PersistedRunsFromJson(mxrun::PersistedRunsToJson(before.state.Persisted()));
  REQUIRE(runs.ok());
  CHECK((*runs)[0].members.size() == 2);
  CHECK((*runs)[0].members[0].desc.agent_id == "agent-h1");

  Scenario after;
  after.state.Restore(after.now, *runs);
  CHECK(after.Resume(11, "h1", 0) == Lines{"n11: waiting 0"});
  CHECK(after.Resume(12, "h2", 0) == Lines{"n12: waiting 0"});
  CHECK(after.Advance(3s).empty());
  after.Beat({11, 12});
  CHECK(after.Succeed(11, 0) == Lines{"n12: peer finished h1 rank 0 (1/2)"});
  CHECK(after.Succeed(12, 0) == Lines{"n11: finished ok", "n12: finished ok"});
  CHECK(after.state.Persisted().empty());  // finished runs are not kept
}

TEST_CASE("a resume the restored master cannot honour is told to stop and re-join",
          "[master][state_dir]") {
  Scenario s;
  s.Join(1, "h1");
  s.Join(2, "h2");
  Scenario after;
  after.state.Restore(after.now, s.state.Persisted());
  Lines wrong_round = after.Resume(11, "h1", 5);
  REQUIRE(wrong_round.size() == 1);
  CHECK_THAT(wrong_round[0], Catch::StartsWith("n11: stop 0/0: the rendezvous master no longer "
                                               "knows round 5"));
  Lines stranger = after.Resume(13, "h9", 0);
  REQUIRE(stranger.size() == 1);
  CHECK_THAT(stranger[0], Catch::Contains("no longer knows round 0"));
}

TEST_CASE("a restored member whose agent does not come back within the lease is gone",
          "[master][state_dir]") {
  Scenario s;
  s.Join(1, "h1");
  s.Join(2, "h2");
  Scenario after;
  after.state.Restore(after.now, s.state.Persisted());
  CHECK(after.Resume(11, "h1", 0) == Lines{"n11: waiting 0"});
  CHECK(after.Advance(4s).empty());
  after.Beat({11});
  Lines expired = after.Advance(2s);
  REQUIRE(expired.size() == 1);
  CHECK_THAT(expired[0], Catch::StartsWith("n11: stop 0/0: h2 left (no heartbeat"));
}

TEST_CASE(
    "the agent of an expired master lease is gone at once: survivors re-form without "
    "waiting for it",
    "[master][etcd]") {
  Scenario s(2, 3);
  s.Join(1, "h1");
  s.Join(2, "h2");
  s.Join(3, "h3");
  s.Advance(5s);  // the last call ends: a round of 3
  REQUIRE(s.state.Persisted().at(0).members.size() == 3);
  Scenario after(2, 3);
  after.state.Restore(after.now, s.state.Persisted());
  // h1's agent hosted the previous master and its lease expired: the stops go to the detached
  // members (nobody hears them: their agents have not reconnected), and the group is re-forming.
  CHECK(after.state.AgentGone(after.now, "agent-h1", "its master lease expired").size() == 2);
  CHECK(after.state.Persisted().empty());
  CHECK(after.state.AgentGone(after.now, "agent-unknown", "x").empty());
  // The survivors reconnect and hear the stop they missed...
  CHECK(after.Resume(12, "h2", 0) == Lines{"n12: stop 0/0: h1 left (its master lease expired)"});
  CHECK(after.Resume(13, "h3", 0) == Lines{"n13: stop 0/0: h1 left (its master lease expired)"});
  // ...and the round closes as soon as both are back, without a last call or a lease's wait.
  CHECK(after.Join(12, "h2") == Lines{"n12: waiting 1"});
  Lines round = after.Join(13, "h3");
  REQUIRE(round.size() == 2);
  CHECK_THAT(round[0], Catch::Contains("round 1 rank 0/2"));
  CHECK_THAT(round[1], Catch::Contains("round 1 rank 1/2"));
}

TEST_CASE("only a change of the kept state asks for a save, never a heartbeat or a tick",
          "[master][state_dir]") {
  Scenario s(2, 2);
  s.Join(1, "node1");
  CHECK_FALSE(s.state.TakeChanged());  // a waiting node is not kept
  s.Join(2, "node2");
  CHECK(s.state.TakeChanged());        // the round closed
  CHECK_FALSE(s.state.TakeChanged());  // taken once
  for (int i = 0; i < 3; ++i) {
    s.Beat({1, 2});
    CHECK(s.Advance(1s).empty());
  }
  CHECK_FALSE(s.state.TakeChanged());
  CHECK(s.Succeed(1, 0) == Lines{"n2: peer finished node1 rank 0 (1/2)"});
  CHECK(s.state.TakeChanged());  // a member's success is kept
  CHECK(s.Gone(2) == Lines{"n1: stop 0/0: node2 left (stream closed)"});
  CHECK(s.state.TakeChanged());  // the group stopped
  CHECK(s.state.Persisted().empty());
}

TEST_CASE("damaged state JSON is refused", "[master][state_dir]") {
  CHECK_FALSE(mxrun::PersistedRunsFromJson("{").ok());
  CHECK_FALSE(mxrun::PersistedRunsFromJson(R"({"format": "other", "runs": []})").ok());
  CHECK(mxrun::PersistedRunsFromJson(R"({"format": "mxrun-master-state-1", "runs": []})")->empty());
}

TEST_CASE("a round of many nodes costs messages in proportion to its nodes", "[master][scale]") {
  // N joins, one node lost and the round re-formed, N-1 successes: every message is owed to one
  // node's own event, except the stops of a re-formation and the first success's news to the
  // others. (Before: every success was told to every member still running, N^2/2 messages.)
  constexpr int kNodes = 500;
  Scenario s(kNodes - 1, kNodes, 0);
  size_t messages = 0;
  for (int i = 1; i <= kNodes; ++i) {
    auto lines = s.Join(i, "h" + std::to_string(i), 1);
    messages += lines.size();
    if (i == kNodes - 1) CHECK(lines == Lines{absl::StrCat("n", i, ": waiting ", i)});
  }
  CHECK(messages == 2 * kNodes - 1);  // N-1 waiting acks, then N rounds with the last join
  // Node 1 is lost: every other member is told to stop once, and re-forms when all are back.
  auto stops = s.Gone(1);
  CHECK(stops.size() == kNodes - 1);
  size_t rounds = 0;
  for (int i = 2; i <= kNodes; ++i) {
    for (const std::string& line : s.Join(i, "h" + std::to_string(i), 1)) {
      rounds += line.find(": round 1 ") != std::string::npos;
      messages += 1;
    }
  }
  CHECK(rounds == kNodes - 1);
  size_t peer_news = 0;
  size_t finished = 0;
  for (int i = 2; i <= kNodes; ++i) {
    for (const std::string& line : s.Succeed(i, 1)) {
      peer_news += line.find("peer finished") != std::string::npos;
      finished += line.find("finished ok") != std::string::npos;
    }
  }
  CHECK(peer_news == kNodes - 2);  // the first success, told to the others; then nothing
  CHECK(finished == kNodes - 1);
  CHECK(s.state.run_count() == 1);
}

TEST_CASE("the master names a straggler among every node's ranks and tells its node only",
          "[master][straggler]") {
  Scenario s(2, 2, 1);
  s.job.stragglers = {1.5, 4};
  s.Join(1, "h1");
  REQUIRE(s.Join(2, "h2").size() == 2);  // round 0: h1 ranks 0-1, h2 ranks 2-3
  using mxrun::RankReport;
  std::vector<std::string> notices;
  for (long long step = 2; step <= 8; step += 2) {
    s.now += 1s;
    auto a = Scenario::Lines(
        s.state.Heartbeat(s.now, 1, 0, {{0, 0, step, 0.1, 0.2}, {1, 1, step, 0.11, 0.2}}));
    auto b = Scenario::Lines(
        s.state.Heartbeat(s.now, 2, 0, {{2, 0, step, 0.1, 0.2}, {3, 1, step, 0.35, 0.2}}));
    notices.insert(notices.end(), a.begin(), a.end());
    notices.insert(notices.end(), b.begin(), b.end());
  }
  REQUIRE(notices.size() == 1);
  CHECK(notices[0] ==
        "n2: round 0 rank 3 is a straggler: 0.350 s a step, 3.5x the other ranks' median "
        "(0.100 s), for 5 steps");  // judged once a second: 1 + 2 + 2 slow steps

  auto snaps = s.state.Snapshot(s.now + 500ms, "");
  REQUIRE(snaps.size() == 1);
  REQUIRE(snaps[0].members.size() == 2);
  const auto& h2 = snaps[0].members[1].ranks;
  REQUIRE(h2.size() == 2);
  CHECK(h2[1].global_rank == 3);
  CHECK(h2[1].straggler);
  CHECK_FALSE(h2[0].straggler);
  CHECK(h2[1].since_report_s == Approx(0.7));  // 0.2 s old when sent, 0.5 s since
  CHECK(snaps[0].history.back().kind == "straggler");
  CHECK(snaps[0].history.back().text.find("(on h2, node 1)") != std::string::npos);

  // Reports the round does not own are ignored: another node's rank, another round.
  s.now += 1s;
  CHECK(s.state.Heartbeat(s.now, 1, 0, {{3, 1, 100, 0.01, 0}}).empty());
  CHECK(s.state.Heartbeat(s.now, 2, 7, {{3, 1, 100, 0.01, 0}}).empty());
  CHECK(s.state.Snapshot(s.now, "")[0].members[1].ranks[1].step == 8);

  // A new round forgets the ranks and their verdicts.
  s.Fail(1, 0, 0);
  s.Join(1, "h1");
  REQUIRE(s.Join(2, "h2").size() == 2);  // round 1
  // Held in a variable: a range-for over a member of a temporary reads freed memory (ASan).
  const auto round1 = s.state.Snapshot(s.now, "");
  for (const auto& m : round1[0].members) CHECK(m.ranks.empty());
  s.now += 1s;
  CHECK(s.state.Heartbeat(s.now, 2, 1, {{3, 1, 1, 0.35, 0}}).empty());
  CHECK_FALSE(s.state.Snapshot(s.now, "")[0].members[1].ranks.at(0).straggler);
}

TEST_CASE("the master judges the ranks' own work where their reports carry it",
          "[master][straggler]") {
  Scenario s(2, 2, 1);
  s.job.stragglers = {1.5, 4};
  s.Join(1, "h1");
  REQUIRE(s.Join(2, "h2").size() == 2);
  std::vector<std::string> notices;
  for (long long step = 2; step <= 8; step += 2) {
    s.now += 1s;
    // Synchronous data parallel: every step 0.3 s; rank 2's own work 3x the others'.
    auto a = Scenario::Lines(
        s.state.Heartbeat(s.now, 1, 0, {{0, 0, step, 0.3, 0, 0.08}, {1, 1, step, 0.3, 0, 0.08}}));
    auto b = Scenario::Lines(
        s.state.Heartbeat(s.now, 2, 0, {{2, 0, step, 0.3, 0, 0.24}, {3, 1, step, 0.3, 0, 0.08}}));
    notices.insert(notices.end(), a.begin(), a.end());
    notices.insert(notices.end(), b.begin(), b.end());
  }
  REQUIRE(notices.size() == 1);
  CHECK(notices[0] ==
        "n2: round 0 rank 2 is a straggler: 0.240 s of its own work (input and forward) a step, "
        "3.0x the other ranks' median (0.080 s), for 5 steps");
  // A busy time that is not a number is a broken agent's: the report is dropped.
  s.now += 1s;
  s.state.Heartbeat(s.now, 1, 0, {{0, 0, 100, 0.3, 0, std::nan("")}});
  CHECK(s.state.Snapshot(s.now, "")[0].members[0].ranks.at(0).step == 8);
}

TEST_CASE("the master judges no stragglers when the job's rule says 0 steps",
          "[master][straggler]") {
  Scenario s;
  s.job.stragglers = {1.5, 0};
  s.Join(1, "h1", 1);
  s.Join(2, "h2", 1);
  for (long long step = 1; step <= 50; ++step) {
    s.now += 1s;
    CHECK(s.state.Heartbeat(s.now, 1, 0, {{0, 0, step, 0.1, 0}}).empty());
    CHECK(s.state.Heartbeat(s.now, 2, 0, {{1, 0, step, 9.0, 0}}).empty());
  }
  // The progress is still shown.
  CHECK(s.state.Snapshot(s.now, "")[0].members[1].ranks.at(0).step_seconds == 9.0);
}

TEST_CASE("a job whose straggler rule is impossible is refused", "[master][straggler]") {
  Scenario s;
  s.job.stragglers = {0.5, 10};
  auto lines = s.Join(1, "h1");
  REQUIRE(lines.size() == 1);
  CHECK(lines[0].find("refused INVALID_ARGUMENT: straggler rule is not valid") !=
        std::string::npos);
}

TEST_CASE("a recovery is timed from the failure to the re-formed group's first reported step",
          "[master]") {
  Scenario s(2, 2, 1);
  s.Join(1, "h1", 1);
  s.Join(2, "h2", 1);
  s.now += 1s;
  s.Fail(2, 0, 1);  // at t=1 s
  s.now += 2s;
  s.Join(1, "h1", 1);
  REQUIRE(s.Join(2, "h2", 1).size() == 2);  // round 1 at t=3 s
  s.now += 4s;
  s.state.Heartbeat(s.now, 1, 1, {});  // no progress yet: no recovery
  CHECK(s.state.Snapshot(s.now, "")[0].last_recovery_s < 0);
  s.now += 1s;  // t=8 s: a step reported 0.5 s ago, made at 7.5 s
  s.state.Heartbeat(s.now, 1, 1, {{0, 0, 1, 0.2, 0.5}});
  const mxrun::RunSnapshot run = s.state.Snapshot(s.now, "")[0];
  CHECK(run.last_recovery_s == Approx(6.5));
  CHECK(run.history.back().kind == "recovered");
  CHECK(run.history.back().text == "round 1 reported its first steps 6.5 s after the failure");
  // Told once: later steps are no new recovery.
  s.now += 1s;
  s.state.Heartbeat(s.now, 2, 1, {{1, 0, 3, 0.2, 0}});
  CHECK(s.state.Snapshot(s.now, "")[0].history.back().kind == "recovered");
  CHECK(s.state.Snapshot(s.now, "")[0].history.size() == run.history.size());
}

TEST_CASE("the master tells the agents when every attempt failed the same way", "[master]") {
  Scenario s(2, 2, 1);
  s.Join(1, "h1", 1);
  s.Join(2, "h2", 1);
  mxrun::WorkerFailure f;
  f.exit_code = 1;
  f.message = "ValueError: bad config";
  s.state.ReportFailure(s.now, 2, 0, f);  // restart 1 of 1
  s.Join(1, "h1", 1);
  s.Join(2, "h2", 1);
  f.global_rank = 0;  // another rank first this time: the same error
  MasterState::Out out = s.state.ReportFailure(s.now, 1, 1, f);
  REQUIRE(out.size() == 2);
  for (const ToAgent& m : out) {
    CHECK(m.kind == ToAgent::Kind::kFinished);
    CHECK(m.same_failure);
    CHECK(m.failure_signature == "exit code 1: ValueError: bad config");
  }

  Scenario t(2, 2, 1);  // the second failure differs: a requeue may help
  t.Join(1, "h1", 1);
  t.Join(2, "h2", 1);
  t.state.ReportFailure(t.now, 2, 0, f);
  t.Join(1, "h1", 1);
  t.Join(2, "h2", 1);
  f.exit_code = 7;
  for (const ToAgent& m : t.state.ReportFailure(t.now, 1, 1, f)) CHECK_FALSE(m.same_failure);
}

TEST_CASE(
    "a repeat offender is left out while the others meet the minimum, and admitted again "
    "after a back-off that doubles",
    "[master][exclusion]") {
  Scenario s(2, 3, 10);
  s.job.exclusion = {2, 3600s, 10s};
  s.Join(1, "h1", 1);
  s.Join(2, "h2", 1);
  s.Join(3, "h3", 1);                  // round 0 at max: h3 has rank 2
  CHECK(s.Fail(3, 0, 2).size() == 3);  // one failure: everybody re-forms
  s.Join(1, "h1", 1);
  s.Join(2, "h2", 1);
  s.Join(3, "h3", 1);  // round 1
  MasterState::Out out = s.state.ReportFailure(s.now, 3, 1, [] {
    mxrun::WorkerFailure f;
    f.global_rank = 2;
    f.host = "h3";
    f.exit_code = 1;
    return f;
  }());
  bool logged = false;
  for (const ToAgent& m : out) {
    if (m.node == 3) {
      CHECK(m.log_line ==
            "run 'job1': leaving h3 out of the next rounds: 2 worker failures within "
            "3600 s: left out for 10 s (exclusion 1; --exclude_after=2)");
      logged = true;
    } else {
      CHECK(m.log_line.empty());
    }
  }
  CHECK(logged);
  // h3 re-joins and is told it is left out; the round closes without it once the others are back.
  auto h3 = s.Join(3, "h3", 1);
  REQUIRE(h3.size() == 1);
  CHECK(h3[0] == "n3: waiting 0");
  s.Join(1, "h1", 1);
  CHECK(s.Join(2, "h2", 1) ==
        Lines{"n1: round 2 rank 0/2 base 0 world 2 master a1:5001 restarts 2",
              "n2: round 2 rank 1/2 base 1 world 2 master a1:5001 restarts 2"});
  auto snap = s.state.Snapshot(s.now, "")[0];
  REQUIRE(snap.members.size() == 3);
  CHECK(snap.members[2].state == "excluded");
  CHECK(snap.members[2].note.find("left out for 10 s") != std::string::npos);
  CHECK(snap.history.back().kind == "round");
  // Heartbeats keep it; after the back-off the group re-forms to admit it.
  for (int i = 0; i < 9; ++i) {
    s.Beat({1, 2, 3});
    CHECK(s.Advance(1s).empty());
  }
  s.Beat({1, 2, 3});
  auto readmit = s.Advance(1500ms);
  CHECK(readmit == Lines{"n3: waiting 1",
                         "n1: stop 2/10: h3's exclusion ended; re-forming the "
                         "group to admit it",
                         "n2: stop 2/10: h3's exclusion ended; re-forming the group to admit it"});
  s.Join(1, "h1", 1);
  CHECK(s.Join(2, "h2", 1).size() == 3);  // round 3 with all three
  // Two more failures: left out again, for twice as long.
  s.Fail(3, 3, 2);
  s.Join(1, "h1", 1);
  s.Join(2, "h2", 1);
  s.Join(3, "h3", 1);
  s.Fail(3, 4, 2);
  CHECK(s.state.Snapshot(s.now, "")[0].history.back().text.find("left out for 20 s (exclusion 2") !=
        std::string::npos);
}

TEST_CASE("no node is left out when the job would fall below its minimum", "[master][exclusion]") {
  Scenario s(3, 3, 10);
  s.job.exclusion = {1, 3600s, 10s};
  s.Join(1, "h1", 1);
  s.Join(2, "h2", 1);
  s.Join(3, "h3", 1);
  for (const ToAgent& m : s.state.ReportFailure(s.now, 3, 0, [] {
         mxrun::WorkerFailure f;
         f.exit_code = 1;
         return f;
       }())) {
    CHECK(m.log_line.empty());
  }
  s.Join(1, "h1", 1);
  s.Join(2, "h2", 1);
  CHECK(s.Join(3, "h3", 1).size() == 3);  // all three in the next round
}

TEST_CASE("a master's run shows its restarts phase by phase and notes a report it left out",
          "[master][restart_phases]") {
  Scenario s(1, 1, 1);
  s.Join(1, "node1");
  CHECK(s.Fail(1, 0, 0) == Lines{"n1: stop restart 1/1: worker rank 0 on h failed (exit code 3)"});
  s.Join(1, "node1");
  s.state.ReportRestartPhases(s.now, 1,
                              mxrun::RestartPhases{1, "rank 0 failed", false, 0.1, 0.2, 0.3, 0.4});
  s.state.ReportRestartPhases(s.now, 1, mxrun::RestartPhases{7, "", false, 0, 0, 0, 0});
  const std::vector<mxrun::RunSnapshot> runs = s.state.Snapshot(s.now, "job1");
  REQUIRE(runs.size() == 1);
  CHECK(runs[0].round == 1);
  REQUIRE(runs[0].restarts.size() == 1);
  CHECK(runs[0].restarts[0].first_step_s == 0.4);
  CHECK_THAT(runs[0].history.back().text,
             Catch::Contains("node1's restart timing left out: round 7 has not formed"));
}
