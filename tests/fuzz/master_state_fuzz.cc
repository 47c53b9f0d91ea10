// libFuzzer target: the rendezvous master's state machine fed random event sequences (joins,
// heartbeats, failure and success reports, departures, resumes, clock ticks) for up to 8 nodes,
// with its invariants checked after every event:
//   - a running run's members hold node ranks 0..n-1, each once;
//   - its world size is the sum of its members' workers;
//   - the restart budget spent is between 0 and max_restarts;
//   - no node is in two runs; every round message fits its round (rank < nodes, ranks < world);
//   - a node left out (excluded) holds no rank in a running round;
//   - flight-recorder sets (a hang's dumps) are passed on only within their round, and no node
//     is asked for its own;
//   - heartbeats carry random rank progress: a member shows only ranks of its own range, and a
//     straggler notice goes to the member that runs the rank it names.
// A violated invariant aborts (a finding).

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "rendezvous/master_state/master_state.h"

namespace {

using mxrun::MasterState;
using mxrun::NodeId;

class Bytes {
 public:
  Bytes(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  bool empty() const { return pos_ >= size_; }
  uint8_t Next() { return pos_ < size_ ? data_[pos_++] : 0; }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

[[noreturn]] void Violated(const std::string& what) {
  std::fprintf(stderr, "master invariant violated: %s\n", what.c_str());
  std::abort();
}

void CheckMessages(const MasterState::Out& out) {
  for (const mxrun::ToAgent& m : out) {
    if (m.kind != mxrun::ToAgent::Kind::kRound) continue;
    const mxrun::RoundAssignment& r = m.round;
    if (r.node_rank < 0 || r.node_rank >= r.num_nodes) Violated("round: node rank out of range");
    if (r.global_rank_base < 0 || r.global_rank_base + r.local_world_size > r.world_size) {
      Violated("round: global ranks beyond the world size");
    }
  }
}

// Each member's global rank range in the round it was last told.
struct Range {
  int first = 0;
  int count = 0;
};

void CheckNotices(const MasterState::Out& out, const std::map<NodeId, Range>& ranges) {
  for (const mxrun::ToAgent& m : out) {
    if (m.kind != mxrun::ToAgent::Kind::kStraggler) continue;
    auto it = ranges.find(m.node);
    if (it == ranges.end()) Violated("straggler notice to a node that was never in a round");
    if (m.straggler.rank < it->second.first ||
        m.straggler.rank >= it->second.first + it->second.count) {
      Violated("straggler notice about a rank the node does not run");
    }
  }
}

void CheckState(const MasterState& state, MasterState::Time now) {
  std::set<NodeId> seen;
  for (const mxrun::RunSnapshot& run : state.Snapshot(now, "")) {
    if (run.restarts_spent < 0 || run.restarts_spent > run.job.max_restarts) {
      Violated("restart budget out of range");
    }
    std::set<int> ranks;
    int workers = 0;
    int members = 0;
    for (const mxrun::MemberSnapshot& m : run.members) {
      if (!seen.insert(m.node).second) Violated("a node in two runs");
      if (m.state == "excluded" && m.node_rank >= 0 && run.phase == "running") {
        Violated("an excluded node holds a rank in a running round");
      }
      if (run.phase == "running" && (m.state == "running" || m.state == "succeeded")) {
        ++members;
        workers += m.desc.local_world_size;
        if (!ranks.insert(m.node_rank).second) Violated("two members with one node rank");
      }
      for (const mxrun::RankSnapshot& r : m.ranks) {
        if (r.global_rank < 0 || r.global_rank >= run.world_size) {
          Violated("a rank shown beyond the world size");
        }
        if (!(r.since_report_s >= 0)) Violated("a rank's report age is negative");
      }
    }
    if (run.phase == "running") {
      if (members == 0) Violated("a running run without members");
      if (*ranks.begin() != 0 || *ranks.rbegin() != members - 1) Violated("node ranks not dense");
      if (workers != run.world_size) Violated("world size is not the sum of the members' workers");
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Bytes in(data, size);
  mxrun::JobDesc job;
  job.min_nodes = 1 + in.Next() % 3;
  job.max_nodes = job.min_nodes + in.Next() % 3;
  job.max_restarts = in.Next() % 3;
  job.timeouts.join_timeout = std::chrono::seconds(10);
  job.timeouts.last_call_timeout = std::chrono::seconds(1);
  job.timeouts.heartbeat_interval = std::chrono::seconds(1);
  job.timeouts.missed_heartbeats = 3;
  job.timeouts.finished_run_ttl = std::chrono::seconds(5);
  job.stragglers = {1.5, 1 + in.Next() % 3};
  // Repeat offenders left out after 1 or 2 failures, for a second or two (then admitted again).
  job.exclusion = {1 + in.Next() % 2, std::chrono::seconds(10), std::chrono::seconds(1)};
  MasterState state;
  MasterState::Time now{};
  std::map<NodeId, int> rounds;    // the last round each node was told
  std::map<NodeId, Range> ranges;  // and its ranks in it
  for (int events = 0; events < 400 && !in.empty(); ++events) {
    const uint8_t op = in.Next() % 9;
    const NodeId node = 1 + in.Next() % 8;
    const std::string run_id = in.Next() % 4 == 0 ? "other" : "job";
    MasterState::Out out;
    switch (op) {
      case 0:
      case 1: {
        mxrun::NodeDesc desc;
        desc.host = "h" + std::to_string(node % 5);
        desc.address = "10.0.0." + std::to_string(node);
        desc.local_world_size = 1 + in.Next() % 3;
        desc.requested_rank = static_cast<int>(in.Next() % 6) - 2;  // -2, -1 (none), 0..3
        desc.hosts_master = in.Next() % 7 == 0;
        desc.master_port = 20000 + static_cast<int>(node);
        desc.agent_id = "agent" + std::to_string(node);
        out = state.Join(now, node, run_id, desc, job);
        break;
      }
      case 2: {
        // Progress for ranks near the node's own (some outside it), with odd values too.
        std::vector<mxrun::RankReport> reports;
        const int n = in.Next() % 4;
        for (int i = 0; i < n; ++i) {
          mxrun::RankReport r;
          r.global_rank = ranges[node].first + static_cast<int>(in.Next() % 6) - 1;
          r.local_rank = in.Next() % 3;
          r.step = static_cast<long long>(in.Next()) - 8;
          const uint8_t t = in.Next();
          r.step_seconds = t == 255   ? std::numeric_limits<double>::infinity()
                           : t == 254 ? std::numeric_limits<double>::quiet_NaN()
                                      : t / 50.0 - 0.5;
          r.age_s = in.Next() / 100.0;
          reports.push_back(r);
        }
        const int round = in.Next() % 5 == 0 ? rounds[node] + 1 : rounds[node];
        out = state.Heartbeat(now, node, round, reports);
        break;
      }
      case 3: {
        mxrun::WorkerFailure failure;
        failure.global_rank = in.Next() % 8;
        failure.host = "h";
        failure.exit_code = 1;
        out = state.ReportFailure(now, node, rounds[node], failure);
        break;
      }
      case 4:
        out = state.ReportSucceeded(now, node, rounds[node]);
        break;
      case 5:
        out = state.NodeGone(now, node, "gone");
        break;
      case 6: {
        mxrun::NodeDesc desc;
        desc.host = "h" + std::to_string(node % 5);
        desc.agent_id = "agent" + std::to_string(in.Next() % 8 + 1);
        desc.local_world_size = 1;
        out = state.Resume(now, 100 + node, run_id, desc, in.Next() % 3);
        break;
      }
      case 7: {
        // A node's flight-recorder dumps after a hang (asking for everyone's, or answering).
        mxrun::FlightRecordSet set;
        set.round = in.Next() % 5 == 0 ? rounds[node] + 1 : rounds[node];
        for (int i = in.Next() % 3; i > 0; --i) {
          set.ranks.push_back({ranges[node].first + i, std::string(in.Next() % 4, 'j'), ""});
        }
        const bool request = in.Next() % 2 == 0;
        out = state.OfferFlightRecords(now, node, set, request);
        for (const mxrun::ToAgent& m : out) {
          if (m.kind == mxrun::ToAgent::Kind::kFlightRequest && m.node == node) {
            Violated("flight records: a node asked for its own");
          }
          if (m.kind == mxrun::ToAgent::Kind::kFlightRecords && m.flight.round != set.round) {
            Violated("flight records: a set of another round passed on");
          }
        }
        break;
      }
      default:
        now += std::chrono::milliseconds(100 * (1 + in.Next() % 40));
        out = state.Tick(now);
        break;
    }
    for (const mxrun::ToAgent& m : out) {
      if (m.kind == mxrun::ToAgent::Kind::kRound) {
        rounds[m.node] = m.round.round;
        ranges[m.node] = {m.round.global_rank_base, m.round.local_world_size};
      }
    }
    CheckMessages(out);
    CheckNotices(out, ranges);
    CheckState(state, now);
  }
  return 0;
}
