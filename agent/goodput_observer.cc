#include "agent/goodput_observer.h"

#include "spdlog/spdlog.h"

namespace mxrun {

void GoodputObserver::Account(void (GoodputClock::*event)(Time), Time now) {
  (clock_.*event)(now);
  if (changed_) changed_(clock_);
}

void GoodputObserver::Progress(Time now, int, int, const WorkerControlMessage& report) {
  clock_.Progress(now, report.step);
  if (changed_) changed_(clock_);
}

void GoodputObserver::Exited(Time now, int, const std::optional<std::string>&) {
  if (!clock_.ran()) return;  // no round ever started: nothing to account
  Account(&GoodputClock::Ended, now);
  spdlog::info("{}", FormatGoodput(clock_.Report(Time::clock::now())));
}

}  // namespace mxrun
