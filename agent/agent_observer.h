#pragma once
// What the agent tells an observer as its job goes on: rounds, the workers of each round, worker
// failures, re-formations and the workers' progress reports. The metrics endpoint
// (agent/agent_metrics.h) is one; the agent works the same without any. Called on the agent's
// loop thread, so implementations must be quick and guard what another thread reads.

#include <chrono>
#include <string>
#include <vector>

#include "agent/goodput.h"
#include "common/straggler_watch.h"
#include "agent/worker_group.h"
#include "common/control_protocol.h"
#include "common/worker_failure.h"
#include "rendezvous/rendezvous.h"

namespace mxrun {

class AgentObserver {
 public:
  using Time = std::chrono::steady_clock::time_point;
  virtual ~AgentObserver() = default;

  // A round started here, with these workers (after a start or an in-process reassignment).
  virtual void RoundStarted(Time now, const RoundAssignment& round,
                            const std::vector<WorkerGroup::WorkerStatus>& workers) = 0;
  // A worker of this node failed (exit, signal or hang): the group is being stopped.
  virtual void WorkerFailed(Time now, const WorkerFailure& failure) = 0;
  // The group re-forms on the rendezvous' word (another node's failure when `restart`, else a
  // node lost or admitted).
  virtual void Reforming(Time now, bool restart, const std::string& reason) = 0;
  // A worker's progress report (control channel); a missing step time is filled in by the agent
  // (the time since the rank's previous report, per step).
  virtual void Progress(Time now, int local_rank, int global_rank,
                        const WorkerControlMessage& report) = 0;
  // Every worker of the node exited 0.
  virtual void GroupSucceeded(Time now) = 0;
  // The node's time accounting changed (a copy: the observer extrapolates it to its own now).
  virtual void GoodputChanged(const GoodputClock& clock) = 0;
  // A rank became a straggler, or stopped being one (straggler_watch.h).
  virtual void StragglerChanged(Time now, const StragglerNews& news) = 0;
};

}  // namespace mxrun
