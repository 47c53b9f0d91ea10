#include "agent/systemd_observer.h"

#include "absl/strings/str_cat.h"
#include "agent/process/event_loop.h"

namespace mxrun {

void SystemdObserver::Started(EventLoop& loop) {
  loop_ = &loop;
  WatchdogTick();
}

void SystemdObserver::WatchdogTick() {
  // WATCHDOG=1 when due (service_notify.h), then a timer for the next one.
  notifier_.Tick(ServiceNotifier::Clock::now());
  if (std::optional<ServiceNotifier::Clock::time_point> next = notifier_.NextWatchdog()) {
    loop_->At(*next, [this] { WatchdogTick(); });
  }
}

void SystemdObserver::RoundStarted(Time, const RoundAssignment& r,
                                   const std::vector<WorkerGroup::WorkerStatus>&) {
  notifier_.Ready(absl::StrCat("round ", r.round, ": node ", r.node_rank, " of ", r.num_nodes,
                               ", ranks ", r.global_rank_base, "-",
                               r.global_rank_base + r.local_world_size - 1, " of ", r.world_size,
                               ", restarts ", r.restart_count, "/", r.max_restarts));
}

void SystemdObserver::Status(const std::string& text, bool stopping) {
  if (stopping) {
    notifier_.Stopping(text);
  } else {
    notifier_.Status(text);
  }
}

}  // namespace mxrun
