#pragma once
// The event loop's timers (EventLoop::At/Every): callbacks due at a time, kept in order. Pure:
// the clock is the caller's, so the order and the repeats are unit-tested without waiting.

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <utility>
#include <vector>

namespace mxrun {

class TimerQueue {
 public:
  using Time = std::chrono::steady_clock::time_point;
  using Callback = std::function<void()>;
  using Id = std::uint64_t;

  // Once at `when`.
  Id At(Time when, Callback callback);
  // At `first`, then every `period` after the time it was due (a late turn does not shift the
  // ones after it; turns missed altogether run once).
  Id Every(Time first, std::chrono::milliseconds period, Callback callback);
  // Removes a timer (from a callback too); an unknown or spent id is ignored.
  void Cancel(Id id);
  // The earliest time a timer is due; none when there is none.
  std::optional<Time> Next() const;
  // Runs every timer due at `now`, in the order they are due (a timer added by a callback runs
  // on a later call). Returns how many ran.
  int RunDue(Time now);

 private:
  struct Timer {
    Callback callback;
    std::chrono::milliseconds period{0};  // 0: once
  };
  Id next_id_ = 1;
  std::multimap<Time, Id> order_;
  std::map<Id, std::pair<Time, Timer>> timers_;
};

}  // namespace mxrun
