#pragma once
// The progress of this node's ranks in the running round, as their reports come (the control
// channel's {"step": N, "step_seconds": S}): a report without its step time gets the time per step
// since an earlier report of the rank; the latest report of every rank is what the agent hands
// the rendezvous, which judges stragglers. Pure: times are given.
//
// Timed against a report at least kMinSpan older, not simply the previous one: an agent kept
// from the CPU reads a rank's reports in bursts, microseconds apart, and timing each against the
// one before gave the last of a burst (the one handed on) a step time of ~0. On a loaded machine
// a rank's 50 ms steps were then judged 7843 times the "others' median" of 0.000 s.

#include <chrono>
#include <deque>
#include <map>
#include <vector>

#include "common/control_protocol.h"
#include "rendezvous/wire/wire.h"

namespace mxrun {

class RankProgressBook {
 public:
  using Time = std::chrono::steady_clock::time_point;
  // Reports closer together than this were read in one burst (one read of the channel).
  static constexpr std::chrono::milliseconds kMinSpan{10};
  // Reports kept per rank to time against (a rank that reports without pause needs no more).
  static constexpr size_t kMaxKept = 256;

  // Records `report` of `global_rank` at `now`; returns it with its step time filled in when it
  // lacked one and can be known: no earlier report at least kMinSpan older, no new step, or
  // nothing earlier at all leave it unknown.
  WorkerControlMessage Record(int local_rank, int global_rank, WorkerControlMessage report,
                              Time now);
  std::vector<RankProgress> Latest() const;
  void Clear() { ranks_.clear(); }  // a new round

 private:
  struct Seen {
    long long step;
    Time at;
  };
  struct Rank {
    RankProgress latest;
    std::deque<Seen> seen;  // its recent reports, oldest first
  };
  std::map<int, Rank> ranks_;  // by global rank
};

}  // namespace mxrun
