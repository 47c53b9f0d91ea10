#include "agent/workers/standby_start.h"

#include <utility>

namespace mxrun {

void StandbyStart::RoundBegan(std::function<void()> wake) {
  began_ = EventLoop::Deadline::clock::now();
  if (!prestart_) return;
  loop_.Cancel(timer_);
  timer_ = loop_.At(began_ + kPrestartDelay, std::move(wake));
}

bool StandbyStart::Due(const std::function<bool()>& all_joined) const {
  if (prestart_) return EventLoop::Deadline::clock::now() - began_ >= kPrestartDelay;
  return all_joined();
}

}  // namespace mxrun
