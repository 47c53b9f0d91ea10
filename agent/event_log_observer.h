#pragma once
// torchelastic's event records (event_log.h) of what the agent tells its observers: the
// rendezvous and its duration, rank assignment, each worker's start, failure, success and
// termination, and the agent's own end.

#include "agent/agent_observer.h"
#include "agent/event_log.h"

namespace mxrun {

class EventLogObserver final : public AgentObserver {
 public:
  explicit EventLogObserver(const EventLogConfig& config) : events_(config) {}

  void Joining(Time now) override { joined_at_ = now; }
  void RoundStarted(Time now, const RoundAssignment& round,
                    const std::vector<WorkerGroup::WorkerStatus>& workers) override;
  void WorkerFailed(Time now, const WorkerFailure& failure) override;
  void WorkersStopped(Time now,
                      const std::vector<WorkerGroup::WorkerStatus>& were_running) override;
  void GroupSucceeded(Time now, const std::vector<WorkerGroup::WorkerStatus>& workers) override;
  void Exited(Time now, int exit_code, const std::optional<std::string>& why_failed) override;

 private:
  ElasticEventLog events_;
  Time joined_at_{};
};

}  // namespace mxrun
