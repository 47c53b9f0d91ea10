#include "agent/workers/node_workers.h"

#include <utility>

namespace mxrun {

NodeWorkers::NodeWorkers(const WorkerSpec& spec, EventLoop& loop, DeathGuardian& guardian,
                         const RoundAssignment& round, double failure_time, AgentSide agent)
    : agent_(std::move(agent)),
      group_(spec, loop, guardian),
      restart_(group_, loop, guardian),
      after_turn_(loop.AfterEachTurn([this] { AfterTurn(); })) {
  restart_.OnLateStart(agent_.late_start);
  group_.Start(round, failure_time);
  restart_.RoundBegan(round);
}

void NodeWorkers::AfterTurn() {
  for (WorkerGroup::ProgressReport& report : group_.TakeProgress()) {
    agent_.progress(std::move(report));
  }
  if (agent_.round_runs()) restart_.MaybeStartStandbys();
}

bool NodeWorkers::OnChildExit(pid_t pid, int wait_status) {
  return group_.OnChildExit(pid, wait_status) || restart_.OnChildExit(pid, wait_status);
}

int NodeWorkers::SignalRunning(int signo) {
  const int sent = group_.SignalRunning(signo);
  restart_.SignalStandbys(signo);
  return sent;
}

NodeWorkers::Keep NodeWorkers::LookBeforeKeeping() {
  group_.LookBeforeKeeping();
  if (group_.HasKeepableWorkers()) return Keep::kWorkers;
  return restart_.HasReadyPrestarts() ? Keep::kPrestarts : Keep::kNothing;
}

std::vector<WorkerGroup::WorkerStatus> NodeWorkers::StopUnkeepable(
    int signo, std::chrono::milliseconds grace, const std::function<void()>& reap) {
  return restart_.StopUnkeepable(signo, grace, reap);
}

std::string NodeWorkers::Reassign(const RoundAssignment& round, double failure_time, int signo,
                                  std::chrono::milliseconds grace,
                                  const std::function<void()>& reap) {
  return restart_.Reassign(round, failure_time, signo, grace, reap);
}

void NodeWorkers::Stop(int signo, std::chrono::milliseconds grace,
                       const std::function<void()>& reap) {
  restart_.StopStandbys();
  group_.Stop(signo, grace, reap);
}

}  // namespace mxrun
