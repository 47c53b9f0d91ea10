#pragma once
// Names stragglers: a rank whose step time stays above `factor` times the median of the other
// ranks' latest step times for `steps` consecutive steps; it stops being one after as many
// consecutive steps at or below that (one fast report, such as reports read in a burst by a
// starved agent, would otherwise clear it and name it again a few steps later: a warning and a
// metric that flap). Pure: fed each rank's progress reports (step number and step time), it says
// when a rank becomes a straggler and when it stops being one. Nothing here touches the job. The
// agent judges its own ranks when its node is the whole job; the rendezvous master judges every
// rank of a multi-node job from the agents' heartbeats.
//
// What is compared: a rank's own work per step (busy seconds: its input and forward, no
// collective; python/mxrun/_busy_time.py) where its reports carry it, else its step time. Under
// synchronous data parallel every rank's step time is the slowest rank's, so only the busy time
// can name the slow one. A rank is judged against the ranks that report the same kind of time,
// never a step time against busy times.
//
// The median of the *other* ranks, not of all: in a small group a slow rank pulls the median of
// all towards itself (with 2 ranks it is half the gap). A report that covers several steps (the
// trainer reports at most every 50 ms, agents pass reports on once a heartbeat) counts for all
// of them.
//
// Cost: Report() judges one rank against the others (sorting them: for a node's few ranks);
// Record() only stores, and Judge() then judges every rank with news against one sorted copy,
// O(R log R) for R ranks, which is what the master does once a heartbeat interval.

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace mxrun {

struct StragglerRule {
  double factor = 1.5;  // --straggler_factor: slower than this times the others' median
  int steps = 20;       // --straggler_steps: for this many consecutive steps (0: never judged)
};

struct StragglerNews {
  int rank = 0;
  bool straggling = false;   // true: became a straggler; false: no longer one
  double step_seconds = 0;   // its step time at the news (its busy time when `busy`)
  double others_median = 0;  // the other ranks' median step time (or busy time)
  long long steps = 0;       // consecutive slow steps so far (fast ones, when no longer one)
  bool busy = false;         // judged by the ranks' own work per step, not whole steps
};

class StragglerWatch {
 public:
  explicit StragglerWatch(StragglerRule rule) : rule_(rule) {}

  // A new round: forget every rank (ranks and speeds may have changed).
  void Reset() { ranks_.clear(); }
  // Rank `rank` completed `step`, its steps taking `step_seconds` each, `busy_seconds` of them its
  // own work (negative: unknown); judged at once against the other ranks' latest times.
  std::optional<StragglerNews> Report(int rank, long long step, double step_seconds,
                                      double busy_seconds = -1);
  // The same report, judged at the next Judge().
  void Record(int rank, long long step, double step_seconds, double busy_seconds = -1);
  // Judges every rank with steps recorded since it was last judged; the news, by rank.
  std::vector<StragglerNews> Judge();
  // A rank that is no longer in the group (its node left): forgotten.
  void Forget(int rank) { ranks_.erase(rank); }
  std::vector<int> Stragglers() const;
  bool IsStraggler(int rank) const;
  const StragglerRule& rule() const { return rule_; }

 private:
  struct Rank {
    long long step = -1;
    double step_seconds = -1;  // the time judged: the busy time when `busy`
    bool busy = false;
    long long unjudged_steps = 0;  // steps with a known time since the rank was last judged
    long long slow_steps = 0;
    long long fast_steps = 0;  // consecutive steps at normal speed while straggling
    bool straggling = false;
  };
  // `sorted`: every rank's latest known time of the rank's kind, ascending (its own among them).
  std::optional<StragglerNews> JudgeRank(int rank_id, Rank& rank,
                                         const std::vector<double>& sorted);
  std::vector<double> SortedTimes(bool busy) const;

  StragglerRule rule_;
  std::map<int, Rank> ranks_;
};

// "rank 3 is a straggler: 0.412 s a step, 2.7x the other ranks' median (0.151 s), for 20
// steps" or "rank 3 is no longer a straggler: 0.150 s a step, the other ranks' median 0.151 s".
std::string DescribeStraggler(const StragglerNews& news);

}  // namespace mxrun
