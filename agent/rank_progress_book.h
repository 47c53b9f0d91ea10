#pragma once
// The progress of this node's ranks in the running round, as their reports come (the control
// channel's {"step": N, "step_seconds": S}): a report without its step time gets the time since
// the rank's previous report, per step; the latest report of every rank is what the agent hands
// the rendezvous, which judges stragglers. Pure: times are given.

#include <chrono>
#include <map>
#include <vector>

#include "common/control_protocol.h"
#include "rendezvous/wire/wire.h"

namespace mxrun {

class RankProgressBook {
 public:
  using Time = std::chrono::steady_clock::time_point;
  // Records `report` of `global_rank` at `now`; returns it with its step time filled in when it
  // lacked one and can be known.
  WorkerControlMessage Record(int local_rank, int global_rank, WorkerControlMessage report,
                              Time now);
  std::vector<RankProgress> Latest() const;
  void Clear() { ranks_.clear(); }  // a new round

 private:
  std::map<int, RankProgress> ranks_;  // by global rank
};

}  // namespace mxrun
