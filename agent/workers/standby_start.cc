#include "agent/workers/standby_start.h"

#include <utility>

namespace mxrun {

void StandbyStart::RoundBegan(bool group_start, std::function<void()> wake) {
  began_ = EventLoop::Deadline::clock::now();
  group_start_ = group_start;
  timer_.Cancel();
  if (!prestart_ || group_start) return;
  timer_.At(began_ + kPrestartDelay, std::move(wake));
}

bool StandbyStart::Due(const std::function<bool()>& all_joined) const {
  if (group_start_) return true;
  if (prestart_) return EventLoop::Deadline::clock::now() - began_ >= kPrestartDelay;
  return all_joined();
}

}  // namespace mxrun
