#pragma once
// Times each of this node's restarts phase by phase (restart_clock.h) from what the agent tells
// its observers, passes each timed restart on (`timed`: the metrics and the master) and prints one
// line per restart at the end of the job, beside the goodput line.

#include <functional>

#include "agent/agent_observer.h"
#include "agent/restart_clock.h"

namespace mxrun {

class RestartPhasesObserver final : public AgentObserver {
 public:
  explicit RestartPhasesObserver(RestartClock::Done timed) : clock_(std::move(timed)) {}

  void WorkerFailed(Time now, const WorkerFailure& failure) override;
  void Reforming(Time now, bool restart, const std::string& reason) override;
  void WorkersStopped(Time now, const std::vector<WorkerGroup::WorkerStatus>&) override {
    clock_.WorkersStopped(now);
  }
  void RoundReady(Time now, const RoundAssignment& round, bool in_process) override {
    clock_.RoundReady(now, round.round, in_process);
  }
  void RoundStarted(Time now, const RoundAssignment&,
                    const std::vector<WorkerGroup::WorkerStatus>&) override {
    clock_.RoundStarted(now);
  }
  void Progress(Time now, int, int, const WorkerControlMessage&) override { clock_.Progress(now); }
  void Exited(Time now, int exit_code, const std::optional<std::string>& why_failed) override;

 private:
  RestartClock clock_;
};

}  // namespace mxrun
