#pragma once
// Names stragglers: a rank whose step time stays above `factor` times the median of the other
// ranks' latest step times for `steps` consecutive steps. Pure: fed each rank's progress reports
// (step number and step time), it says when a rank becomes a straggler and when it stops being
// one. Nothing here touches the job.
//
// The median of the *other* ranks, not of all: in a small group a slow rank pulls the median of
// all towards itself (with 2 ranks it is half the gap). A report that covers several steps (the
// trainer reports at most every 50 ms) counts for all of them.

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace mxrun {

struct StragglerRule {
  double factor = 1.5;  // --straggler_factor: slower than this times the others' median
  int steps = 20;       // --straggler_steps: for this many consecutive steps
};

struct StragglerNews {
  int rank = 0;
  bool straggling = false;      // true: became a straggler; false: no longer one
  double step_seconds = 0;      // its step time at the news
  double others_median = 0;     // the other ranks' median step time
  long long steps = 0;          // consecutive slow steps so far
};

class StragglerWatch {
 public:
  explicit StragglerWatch(StragglerRule rule) : rule_(rule) {}

  // A new round: forget every rank (ranks and speeds may have changed).
  void Reset() { ranks_.clear(); }
  // Rank `rank` completed `step`, its steps taking `step_seconds` each (negative: unknown).
  std::optional<StragglerNews> Report(int rank, long long step, double step_seconds);
  std::vector<int> Stragglers() const;
  const StragglerRule& rule() const { return rule_; }

 private:
  struct Rank {
    long long step = -1;
    double step_seconds = -1;
    long long slow_steps = 0;
    bool straggling = false;
  };
  StragglerRule rule_;
  std::map<int, Rank> ranks_;
};

// "rank 3 is a straggler: 0.412 s a step, 2.7x the other ranks' median (0.151 s), for 20
// steps" or "rank 3 is no longer a straggler: 0.150 s a step, the other ranks' median 0.151 s".
std::string DescribeStraggler(const StragglerNews& news);

}  // namespace mxrun
