#pragma once
// A timer on the event loop that cancels itself: when its owner is destroyed, and when it is armed
// again (one armed at a time per ScopedTimer). A mechanism keeps one as a member instead of a
// TimerId it must remember to cancel before re-arming and in its destructor, and asks armed()
// instead of keeping a flag beside it. The loop must outlive it: a member of something the loop's
// owner destroys first (the agent's workers, observers and hang monitor are).

#include <chrono>
#include <utility>

#include "agent/process/event_loop.h"

namespace mxrun {

class ScopedTimer {
 public:
  explicit ScopedTimer(EventLoop& loop) : loop_(loop) {}
  ~ScopedTimer() { Cancel(); }
  ScopedTimer(const ScopedTimer&) = delete;
  ScopedTimer& operator=(const ScopedTimer&) = delete;

  // `callback` once at `when`, in place of whatever was armed. The timer is disarmed before the
  // callback runs, so the callback may arm it again.
  void At(EventLoop::Deadline when, EventLoop::Callback callback) {
    Cancel();
    id_ = loop_.At(when, [this, callback = std::move(callback)] {
      id_ = 0;
      callback();
    });
  }
  // `callback` at `first` and every `period` after, in place of whatever was armed.
  void Every(EventLoop::Deadline first, std::chrono::milliseconds period,
             EventLoop::Callback callback) {
    Cancel();
    id_ = loop_.Every(first, period, std::move(callback));
  }
  void Cancel() {
    if (id_ != 0) loop_.Cancel(std::exchange(id_, 0));
  }
  bool armed() const { return id_ != 0; }

 private:
  EventLoop& loop_;
  EventLoop::TimerId id_ = 0;  // 0: none armed
};

}  // namespace mxrun
