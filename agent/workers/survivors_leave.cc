#include "agent/workers/survivors_leave.h"

#include <algorithm>
#include <fstream>
#include <string>

#include "agent/process/descendants.h"

namespace mxrun {
namespace {

bool CatchesSignal(pid_t pid, int signo) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("SigCgt:", 0) != 0) continue;
    try {
      return ((std::stoull(line.substr(7), nullptr, 16) >> (signo - 1)) & 1) != 0;
    } catch (const std::exception&) {
      return false;  // unreadable: as if not caught (signalled at once, as before)
    }
  }
  return false;  // gone
}

// Runs `loop` (and `reap` after each turn) until none of `waited` runs, or kSurvivorsLeave has
// passed and one still running has not said it is leaving, or kLeavingExit has passed. Each
// turn, one that no longer handles `signo` is signalled now (its own exit would only be slower)
// and leaves `waited`.
void AwaitLeaving(EventLoop& loop, std::vector<WorkerProcess*>& waited, int signo,
                  const std::function<void(WorkerProcess&)>& signal,
                  const std::function<void()>& reap,
                  const std::function<bool(const WorkerProcess&, int)>& handles) {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point start = Clock::now();
  auto running = [&waited](bool only_silent) {
    for (const WorkerProcess* worker : waited) {
      const bool leaving = worker->control != nullptr && worker->control->leaving();
      if (worker->running && !(only_silent && leaving)) return true;
    }
    return false;
  };
  for (;;) {
    std::vector<WorkerProcess*> still;
    for (WorkerProcess* worker : waited) {
      if (worker->running && !handles(*worker, signo)) {
        signal(*worker);
      } else {
        still.push_back(worker);
      }
    }
    waited.swap(still);
    if (!running(false)) return;
    const Clock::time_point now = Clock::now();
    const bool all_leaving = !running(true);
    const Clock::time_point until = start + (all_leaving ? kLeavingExit : kSurvivorsLeave);
    if (now >= until) return;
    loop.RunOnce(std::min(until, now + kLeavingRecheck));
    reap();
  }
}

}  // namespace

bool SurvivorsMayLeave(const WorkerFailure& failure) { return !failure.hang.hung(); }

bool HandlesSignal(const WorkerProcess& worker, int signo) {
  if (CatchesSignal(worker.pid, signo)) return true;
  for (pid_t pid : ListDescendants(worker.pid, {})) {
    if (CatchesSignal(pid, signo)) return true;
  }
  return false;
}

void SignalSurvivors(EventLoop& loop, const std::vector<WorkerProcess*>& workers, int signo,
                     const WorkerFailure* failure,
                     const std::function<void(WorkerProcess&)>& signal,
                     const std::function<void()>& reap,
                     const std::function<bool(const WorkerProcess&, int)>& handles) {
  std::vector<WorkerProcess*> later;
  const bool may_leave = failure != nullptr && SurvivorsMayLeave(*failure);
  for (WorkerProcess* worker : workers) {
    if (!worker->running) continue;
    if (may_leave && handles(*worker, signo)) {
      later.push_back(worker);
    } else {
      signal(*worker);  // all at once, or the default action ends it sooner than its own exit
    }
  }
  if (later.empty()) return;
  AwaitLeaving(loop, later, signo, signal, reap, handles);
  for (WorkerProcess* worker : later) {
    if (worker->running) signal(*worker);
  }
}

}  // namespace mxrun
