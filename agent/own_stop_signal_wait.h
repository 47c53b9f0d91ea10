#pragma once
// Under a manager that stops the whole process tree (Slurm's scancel, systemd's stop), the
// workers get their SIGTERM one after another with mxrun's own, so a worker may die of it first.
// Such a death waits a short while for mxrun's own signal before it counts as the worker's
// failure: if the signal comes, the job was cancelled. Pure: times are given
// (AgentSettings::await_own_stop_signal).

#include <chrono>
#include <optional>

#include "common/worker_failure.h"

namespace mxrun {

class OwnStopSignalWait {
 public:
  using Time = std::chrono::steady_clock::time_point;
  enum class Verdict {
    kJudge,  // a failure as any other: judge it now
    kBegin,  // the wait begins: check again at deadline() (or when the signal comes)
    kWait,   // still waiting, or the signal came (the stop path reports the cancellation)
  };
  explicit OwnStopSignalWait(std::chrono::milliseconds wait) : wait_(wait) {}

  Verdict Check(Time now, const WorkerFailure& failure, bool own_signal_received);
  void Reset() { deadline_.reset(); }  // a new group
  Time deadline() const { return deadline_.value_or(Time{}); }

  // Ended by SIGTERM or SIGINT (or the exit codes a handler gives them, 143 and 130).
  static bool EndedByStopSignal(const WorkerFailure& failure);

 private:
  std::chrono::milliseconds wait_;
  std::optional<Time> deadline_;
};

}  // namespace mxrun
