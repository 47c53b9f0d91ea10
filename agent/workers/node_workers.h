#pragma once
// This node's workers as the agent sees them: one attempt's worker group (worker_group.h) and its
// in-process restart with the warm standbys (in_process_restart.h), behind one seam. The agent
// asks for what it decides on (start, keep or stop, a failure, the exits, progress) and never
// reaches the two apart; which of them a call goes to, and in which order (the standbys stop
// before the group, the restart is destroyed before the group it calls into), is decided here.

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "agent/process/death_guardian.h"
#include "agent/process/event_loop.h"
#include "agent/process/turn_hooks.h"
#include "agent/workers/in_process_restart.h"
#include "agent/workers/worker_group.h"

namespace mxrun {

class NodeWorkers {
 public:
  // What the workers tell the agent. `late_start`: the local rank of a rank that waited for a
  // standby, once it has its process (for the hang monitor). After each turn of the agent's loop
  // (the workers add themselves to its turn hooks): `progress` gets each progress report taken
  // from the group, then the standbys due are started and a rank that waits for one is handed on,
  // while `round_runs` says the round is running.
  struct AgentSide {
    std::function<void(int local_rank)> late_start;
    std::function<void(WorkerGroup::ProgressReport report)> progress;
    std::function<bool()> round_runs;
  };

  // Starts `round`'s workers, and the standbys with them.
  NodeWorkers(const WorkerSpec& spec, EventLoop& loop, DeathGuardian& guardian,
              const RoundAssignment& round, double failure_time, AgentSide agent);
  NodeWorkers(const NodeWorkers&) = delete;
  NodeWorkers& operator=(const NodeWorkers&) = delete;

  // The group, for what only watches it (the hang monitor).
  WorkerGroup& group() { return group_; }
  WorkerGroup::State state() const { return group_.state(); }
  const std::optional<WorkerFailure>& first_failure() const { return group_.first_failure(); }
  std::vector<WorkerGroup::WorkerStatus> Workers() const { return group_.Workers(); }
  void MarkHung(int local_rank, const WorkerHang& hang) { group_.MarkHung(local_rank, hang); }
  void Escalate() { group_.Escalate(); }

  // A reaped child that was a worker or a standby; false when it was neither.
  bool OnChildExit(pid_t pid, int wait_status);
  // Passes `signo` on to the running workers and the standbys; returns how many workers got it.
  int SignalRunning(int signo);

  // After a failure: reads every worker's state (a stopped one is not kept), then whether the
  // next round can be taken in-process, by kept workers or --prestart's interpreters.
  enum class Keep { kWorkers, kPrestarts, kNothing };
  Keep LookBeforeKeeping();
  // Stops the workers that cannot be kept; returns them, as they were while running.
  std::vector<WorkerGroup::WorkerStatus> StopUnkeepable(int signo, std::chrono::milliseconds grace,
                                                        const std::function<void()>& reap);
  // The kept workers take `round` (restart_.Reassign); one line for the log.
  std::string Reassign(const RoundAssignment& round, double failure_time, int signo,
                       std::chrono::milliseconds grace, const std::function<void()>& reap);
  // Stops the standbys, then every worker.
  void Stop(int signo, std::chrono::milliseconds grace, const std::function<void()>& reap);
  // The group succeeded: its clean-up.
  void Finish() { group_.Finish(); }

 private:
  void AfterTurn();  // AgentSide's progress and standbys

  AgentSide agent_;
  WorkerGroup group_;
  InProcessRestart restart_;    // declared after the group: destroyed first
  TurnHooks::Hook after_turn_;  // declared last: out of the loop before the rest goes
};

}  // namespace mxrun
