#pragma once
// Times this node's restarts phase by phase (common/restart_phases.h) from what the agent tells
// its observers. Pure: fed events with their times, no clock of its own.
//
// A restart opens when a failure is seen (this node's worker, or the rendezvous' word that the
// group re-forms) and no restart is open yet; a second failure seen before the new workers run
// belongs to the same restart. It is done at the new round's first progress report, or, with
// that step unknown, when the next failure is seen or the job ends. A failure after which no
// round formed (the job failed) is no restart and is dropped.

#include <chrono>
#include <deque>
#include <functional>
#include <optional>
#include <string>

#include "common/restart_phases.h"

namespace mxrun {

class RestartClock {
 public:
  using Time = std::chrono::steady_clock::time_point;
  static constexpr size_t kKept = 64;  // the newest restarts kept for the summary; older: counted

  // A failure was seen; `cause` says which (kept from the first failure of a restart).
  void FailureSeen(Time now, const std::string& cause);
  // The old workers are stopped (all, or those not kept for an in-process restart).
  void WorkersStopped(Time now);
  // The rendezvous gave round `round`; `in_process`: kept workers and standbys take it.
  void RoundReady(Time now, int round, bool in_process);
  // That round's workers run.
  void RoundStarted(Time now);
  // A worker's progress report.
  void Progress(Time now);
  // The job is over: an open restart is done with what is known.
  void Ended();

  // Called with each restart once it is done (its first step seen, or known never to come).
  using Done = std::function<void(const RestartPhases&)>;
  explicit RestartClock(Done done = nullptr) : done_(std::move(done)) {}

  // The newest restarts done (at most kKept), oldest first, and how many older ones were dropped.
  const std::deque<RestartPhases>& done() const { return finished_; }
  long long dropped() const { return dropped_; }
  long long count() const { return dropped_ + static_cast<long long>(finished_.size()); }

 private:
  struct Open {
    RestartPhases phases;
    Time seen;
    std::optional<Time> stopped;
    std::optional<Time> ready;
    std::optional<Time> running;
  };
  void Finish();

  Done done_;
  std::optional<Open> open_;
  std::deque<RestartPhases> finished_;
  long long dropped_ = 0;
};

}  // namespace mxrun
