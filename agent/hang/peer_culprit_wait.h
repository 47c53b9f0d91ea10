#pragma once
// On a node of a multi-node job, workers that go silent while none of them is unable to run
// (stopped, or in uninterruptible sleep) are most likely waiting in a collective for a rank on
// another node that is: that node finds its own worker stopped and reports it at once, and the
// master re-forms the group, whose kept workers keep their state. Judging the waiting workers
// hung at the same moment would stop them too and lose that state. So such verdicts are held for
// a grace period: a new round (the culprit reported elsewhere) drops them (Reset); if none comes,
// they are acted on when the grace ends, a distributed hang with no culprit found anywhere.
// The same holds on one node while a worker of the group has not beaten yet: a process started
// for an in-process round, still loading, keeps the kept workers silent in their join.
//
// Pure: verdicts and times in, verdicts out; the hang monitor supplies the facts.

#include <chrono>
#include <optional>
#include <vector>

#include "agent/hang/hang_watch.h"

namespace mxrun {

class PeerCulpritWait {
 public:
  using Time = std::chrono::steady_clock::time_point;
  explicit PeerCulpritWait(std::chrono::milliseconds grace) : grace_(grace) {}

  // The verdicts to act on now. New silence verdicts (heartbeat, first step) with another rank
  // that may hold the workers up (`held_up_elsewhere`: a multi-node job, or a worker of this node
  // still starting)
  // and no local worker unable to run (`local_culprit` false) are held, once, for the grace;
  // held verdicts come back (with any new ones) when their grace has ended, and at once when a
  // new verdict would not be held.
  std::vector<HangVerdict> Sift(std::vector<HangVerdict> verdicts, bool held_up_elsewhere,
                                bool local_culprit, Time now);
  // When the held verdicts fall due (nullopt: none held).
  std::optional<Time> deadline() const;
  bool holding() const { return !held_.empty(); }
  std::chrono::milliseconds grace() const { return grace_; }
  // A new group or round: whatever was held is moot.
  void Reset();

 private:
  std::chrono::milliseconds grace_;
  std::vector<HangVerdict> held_;
  Time until_{};
};

}  // namespace mxrun
