#include "agent/restart_phases_observer.h"

#include "absl/strings/str_cat.h"
#include "spdlog/spdlog.h"

namespace mxrun {

void RestartPhasesObserver::WorkerFailed(Time now, const WorkerFailure& failure) {
  clock_.FailureSeen(
      now, absl::StrCat("rank ", failure.global_rank, " failed: ", DescribeExit(failure)));
}

void RestartPhasesObserver::Reforming(Time now, bool restart, const std::string& reason) {
  clock_.FailureSeen(now, restart ? reason : absl::StrCat("re-formed: ", reason));
}

void RestartPhasesObserver::Exited(Time, int, const std::optional<std::string>&) {
  clock_.Ended();
  if (clock_.count() == 0) return;
  if (clock_.dropped() > 0) {
    spdlog::info("restarts, phase by phase: {} in all, the first {} not shown", clock_.count(),
                 clock_.dropped());
  }
  long long number = clock_.dropped();
  for (const RestartPhases& phases : clock_.done()) {
    spdlog::info("{}", FormatRestartPhases(phases, static_cast<int>(++number)));
  }
}

}  // namespace mxrun
