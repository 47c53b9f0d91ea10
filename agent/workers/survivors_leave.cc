#include "agent/workers/survivors_leave.h"

namespace mxrun {

bool SurvivorsMayLeave(const WorkerFailure& failure) { return !failure.hang.hung(); }

void AwaitLeaving(EventLoop& loop, const std::vector<WorkerProcess*>& workers,
                  const std::function<void()>& reap) {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point start = Clock::now();
  auto running = [&workers](bool only_silent) {
    for (const WorkerProcess* worker : workers) {
      const bool leaving = worker->control != nullptr && worker->control->leaving();
      if (worker->running && !(only_silent && leaving)) return true;
    }
    return false;
  };
  while (running(false)) {
    const Clock::time_point now = Clock::now();
    const bool all_leaving = !running(true);
    const Clock::time_point until = start + (all_leaving ? kLeavingExit : kSurvivorsLeave);
    if (now >= until) return;
    loop.RunOnce(until);
    reap();
  }
}

}  // namespace mxrun
