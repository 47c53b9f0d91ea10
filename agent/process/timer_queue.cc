#include "agent/process/timer_queue.h"

namespace mxrun {

TimerQueue::Id TimerQueue::At(Time when, Callback callback) {
  return Every(when, std::chrono::milliseconds(0), std::move(callback));
}

TimerQueue::Id TimerQueue::Every(Time first, std::chrono::milliseconds period, Callback callback) {
  const Id id = next_id_++;
  timers_[id] = {first, Timer{std::move(callback), period}};
  order_.emplace(first, id);
  return id;
}

void TimerQueue::Cancel(Id id) {
  auto it = timers_.find(id);
  if (it == timers_.end()) return;
  auto [begin, end] = order_.equal_range(it->second.first);
  for (auto o = begin; o != end; ++o) {
    if (o->second == id) {
      order_.erase(o);
      break;
    }
  }
  timers_.erase(it);
}

std::optional<TimerQueue::Time> TimerQueue::Next() const {
  if (order_.empty()) return std::nullopt;
  return order_.begin()->first;
}

int TimerQueue::RunDue(Time now) {
  // Taken first, so that what the callbacks add or cancel changes only later calls.
  std::vector<Id> due;
  for (auto it = order_.begin(); it != order_.end() && it->first <= now; ++it) {
    due.push_back(it->second);
  }
  int ran = 0;
  for (Id id : due) {
    auto it = timers_.find(id);
    if (it == timers_.end()) continue;  // cancelled by an earlier callback of this call
    const Time when = it->second.first;
    Timer timer = it->second.second;
    Cancel(id);
    if (timer.period.count() > 0) {
      Time again = when + timer.period;
      while (again <= now) again += timer.period;  // turns missed altogether run once
      timers_[id] = {again, timer};
      order_.emplace(again, id);
    }
    timer.callback();
    ++ran;
  }
  return ran;
}

}  // namespace mxrun
