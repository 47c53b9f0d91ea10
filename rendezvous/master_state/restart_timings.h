#pragma once
// A run's restarts as its nodes timed them (common/restart_phases.h): every node sends each of
// its restarts once, and the master shows per restart the slowest node's figure per phase (the
// group waits for it). Bounded: the newest kKept rounds, each folded into one record as its
// reports come (an agent sends each restart once), so memory does not grow with the nodes.

#include <deque>
#include <string>
#include <vector>

#include "common/restart_phases.h"

namespace mxrun {

class RestartTimings {
 public:
  static constexpr size_t kKept = 50;

  // A node's report. Returns what is wrong with it (empty when it was taken): values out of
  // range, a round the run has not formed (`current_round`) or one too old to keep.
  std::string Add(const RestartPhases& phases, int current_round);

  // Oldest first, each the slowest of its nodes' reports.
  std::vector<RestartPhases> Slowest() const;

 private:
  std::deque<RestartPhases> rounds_;  // the slowest so far, by round, ascending
};

}  // namespace mxrun
