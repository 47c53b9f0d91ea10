#pragma once
// The master's view of a running round's progress: each rank's last step and step time, as the
// agents pass them on in their heartbeats, and the stragglers among them (common/
// straggler_watch.h), judged over every rank of the job at most once per heartbeat interval.
// Pure, like MasterState, which keeps one per run and resets it with every new round.

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <vector>

#include "common/straggler_watch.h"
#include "rendezvous/wire/wire.h"

namespace mxrun {

// A rank as `mxrun status` and the status page show it.
struct RankSnapshot {
  int global_rank = 0;
  int local_rank = 0;
  long long step = 0;
  double step_seconds = -1;
  double since_report_s = 0;  // seconds since the rank's last progress report
  bool straggler = false;
};

struct StragglerVerdict {
  NodeId node = 0;  // the member whose agent runs the rank
  StragglerNews news;
};

class RunProgress {
 public:
  using Time = std::chrono::steady_clock::time_point;
  explicit RunProgress(StragglerRule rule = {}) : stragglers_(rule) {}

  // A new round: member `node` holds global ranks [first, first + count). Forgets every report.
  struct Ranks {
    int first = 0;
    int count = 0;
  };
  void NewRound(int round, std::map<NodeId, Ranks> owners);
  // The member's session moved (its agent reconnected to a restarted master).
  void MoveNode(NodeId from, NodeId to);
  // `node`'s heartbeat in `round`. Reports of another round, and ranks that are not the node's
  // (or with impossible values), are ignored: a late heartbeat from before a re-formation must
  // not pass as this round's progress.
  void Report(Time now, NodeId node, int round, const std::vector<RankReport>& ranks);
  // Stragglers named or cleared since the last judgement; judges at most once per `every`.
  std::vector<StragglerVerdict> Judge(Time now, std::chrono::milliseconds every);

  std::vector<RankSnapshot> RanksOf(NodeId node, Time now) const;
  // When the round's first reported step was made (on the master's clock: received minus the
  // report's age); nullopt before any.
  std::optional<Time> first_report_at() const { return first_report_at_; }
  const StragglerRule& rule() const { return stragglers_.rule(); }

 private:
  struct Rank {
    RankReport report;
    Time received;
  };
  int round_ = -1;
  std::map<NodeId, Ranks> owners_;
  std::map<NodeId, std::map<int, Rank>> ranks_;  // by node, then global rank
  // The members' rank ranges by first rank, for finding a rank's node: O(members) to build at
  // each round (a map of every rank cost 131,072 insertions a round at 16,384 nodes of 8).
  struct Owner {
    int first = 0;
    int count = 0;
    NodeId node = 0;
  };
  std::vector<Owner> owner_ranges_;
  std::optional<NodeId> OwnerOf(int rank) const;
  StragglerWatch stragglers_;
  Time next_judgement_ = Time::min();
  std::optional<Time> first_report_at_;
};

}  // namespace mxrun
