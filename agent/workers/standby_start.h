#pragma once
// When a group's warm standbys may start (worker_group.h): not before its workers have had the
// cores for their own start. A script that speaks the control protocol says "joined" once its
// group is formed, and the standbys start then. An ordinary script run with --prestart never
// says so: its pre-started interpreters start kPrestartDelay after the round began, and a timer
// on the loop wakes the agent for it.

#include <chrono>
#include <functional>

#include "agent/process/event_loop.h"

namespace mxrun {

// How long after a round starts its pre-started interpreters (--prestart) are started: the
// workers' own start (interpreter, import torch, setup) comes first and has the cores.
inline constexpr std::chrono::milliseconds kPrestartDelay{5'000};

class StandbyStart {
 public:
  StandbyStart(bool prestart, EventLoop& loop) : prestart_(prestart), loop_(loop) {}
  ~StandbyStart() { loop_.Cancel(timer_); }
  StandbyStart(const StandbyStart&) = delete;
  StandbyStart& operator=(const StandbyStart&) = delete;

  // A round began: with --prestart, `wake` is called when its delay is over.
  void RoundBegan(std::function<void()> wake);
  // Whether the standbys may start now; `all_joined` is asked only where it decides.
  bool Due(const std::function<bool()>& all_joined) const;

 private:
  const bool prestart_;
  EventLoop& loop_;
  EventLoop::Deadline began_{};
  EventLoop::TimerId timer_ = 0;
};

}  // namespace mxrun
