#pragma once
// When a group's warm standbys may start (worker_group.h). At the group's start they start with
// its workers, so that a failure at any moment, even in the first second of training, finds one
// ready (a standby started later was still importing torch when a worker died 1 s into training,
// and a cold process was started beside it: slower than torchrun). In a later round (an
// in-process restart) the survivors are training and the new ranks starting, so a replacement
// waits until they have had the cores: a script that speaks the control protocol says "joined"
// once its group is formed, and the standbys start then; an ordinary script run with --prestart
// never says so, and its pre-started interpreters start kPrestartDelay after the round began, a
// timer on the loop waking the agent for it.

#include <chrono>
#include <functional>

#include "agent/process/event_loop.h"
#include "agent/process/scoped_timer.h"

namespace mxrun {

// How long after a later round starts its pre-started interpreters (--prestart) are started: the
// new workers' own start (interpreter, import torch, setup) comes first and has the cores.
inline constexpr std::chrono::milliseconds kPrestartDelay{5'000};

class StandbyStart {
 public:
  StandbyStart(bool prestart, EventLoop& loop) : prestart_(prestart), timer_(loop) {}
  StandbyStart(const StandbyStart&) = delete;
  StandbyStart& operator=(const StandbyStart&) = delete;

  // A round began, the group's first (`group_start`: its workers all start now) or a later one:
  // with --prestart, `wake` is called when a later round's delay is over.
  void RoundBegan(bool group_start, std::function<void()> wake);
  // Whether the standbys may start now; `all_joined` is asked only where it decides.
  bool Due(const std::function<bool()>& all_joined) const;

 private:
  const bool prestart_;
  EventLoop::Deadline began_{};
  bool group_start_ = false;
  ScopedTimer timer_;  // a later round's prestart delay
};

}  // namespace mxrun
