#pragma once
// What the agent tells its observers as its job goes on: the rendezvous' word, rounds and their
// workers, failures, stops, re-formations, the workers' progress, its status lines and its end.
// The agent itself only decides (elastic_agent.h); everything that reports what happened is an
// observer, each in its own file: the time accounting (goodput_observer.h), each restart's phases
// (restart_phases_observer.h), torchelastic's event records (event_log_observer.h), systemd's
// notifications (systemd_observer.h) and the metrics endpoint (agent_metrics.h). Every method has a
// default that does nothing, so an observer says only what it listens to. Called on the agent's
// loop thread, in the order the observers were given, so implementations must be quick and guard
// what another thread reads.

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "agent/goodput.h"
#include "agent/workers/worker_group.h"
#include "common/control_protocol.h"
#include "common/restart_phases.h"
#include "common/straggler_watch.h"
#include "common/worker_failure.h"
#include "rendezvous/rendezvous.h"

namespace mxrun {

class EventLoop;

class AgentObserver {
 public:
  using Time = std::chrono::steady_clock::time_point;
  virtual ~AgentObserver() = default;

  // The agent's loop exists: an observer may register its timers on it.
  virtual void Started(EventLoop& /*loop*/) {}
  // The rendezvous registered this node (`reason`: what it waits for, or why it is left out).
  virtual void Registered(Time /*now*/, const std::string& /*reason*/) {}
  // The node asks the rendezvous for a round.
  virtual void Joining(Time /*now*/) {}
  // The rendezvous gave a round, before its workers start; `in_process`: the group's kept workers
  // and standbys take it (an in-process restart).
  virtual void RoundReady(Time /*now*/, const RoundAssignment& /*round*/, bool /*in_process*/) {}
  // A round started here, with these workers (after a start or an in-process reassignment).
  virtual void RoundStarted(Time /*now*/, const RoundAssignment& /*round*/,
                            const std::vector<WorkerGroup::WorkerStatus>& /*workers*/) {}
  // A worker of this node failed (exit, signal or hang): the group is being stopped.
  virtual void WorkerFailed(Time /*now*/, const WorkerFailure& /*failure*/) {}
  // The agent stopped its group; `were_running`: the workers that were running until then.
  virtual void WorkersStopped(Time /*now*/,
                              const std::vector<WorkerGroup::WorkerStatus>& /*were_running*/) {}
  // The group re-forms on the rendezvous' word (another node's failure when `restart`, else a
  // node lost or admitted).
  virtual void Reforming(Time /*now*/, bool /*restart*/, const std::string& /*reason*/) {}
  // A worker's progress report (control channel); a missing step time is filled in by the agent
  // (the time since the rank's previous report, per step).
  virtual void Progress(Time /*now*/, int /*local_rank*/, int /*global_rank*/,
                        const WorkerControlMessage& /*report*/) {}
  // Every worker of the node exited 0.
  virtual void GroupSucceeded(Time /*now*/,
                              const std::vector<WorkerGroup::WorkerStatus>& /*workers*/) {}
  // The node's time accounting changed (a copy: the observer extrapolates it to its own now).
  virtual void GoodputChanged(const GoodputClock& /*clock*/) {}
  // A restart of this node is timed, phase by phase (restart_phases_observer.h).
  virtual void RestartTimed(const RestartPhases& /*phases*/) {}
  // A rank became a straggler, or stopped being one (straggler_watch.h).
  virtual void StragglerChanged(Time /*now*/, const StragglerNews& /*news*/) {}
  // A line on where the agent stands (also logged); `stopping`: it is on its way out.
  virtual void Status(const std::string& /*text*/, bool /*stopping*/) {}
  // The agent is done: its exit code, and why it failed when it did.
  virtual void Exited(Time /*now*/, int /*exit_code*/,
                      const std::optional<std::string>& /*why_failed*/) {}
};

}  // namespace mxrun
