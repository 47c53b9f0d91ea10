#pragma once
// The console collapse (console_collapse.h) on the agent's loop: relays offer their console lines
// here instead of writing them, a timer writes what is due, and Flush writes everything pending
// at once (a worker failed, so that its last lines come before the agent's word on it; the group
// ends). One per worker group, when --log_collapse_window is above 0.

#include <chrono>
#include <optional>
#include <set>
#include <string_view>

#include "agent/process/event_loop.h"
#include "agent/process/scoped_timer.h"
#include "agent/workers/console_collapse.h"
#include "agent/workers/console_line.h"

namespace mxrun {

class ConsoleCollapser {
 public:
  ConsoleCollapser(EventLoop& loop, std::chrono::milliseconds window, ConsoleStyle style)
      : collapse_(window), style_(std::move(style)), timer_(loop) {}
  ~ConsoleCollapser();
  ConsoleCollapser(const ConsoleCollapser&) = delete;
  ConsoleCollapser& operator=(const ConsoleCollapser&) = delete;

  void Offer(const ConsoleSource& from, std::string_view line);
  void Flush();

 private:
  void Write(const std::vector<CollapsedLine>& lines);
  void Arm();

  ConsoleCollapse collapse_;
  ConsoleStyle style_;
  ScopedTimer timer_;  // the next due line's
  std::optional<ConsoleCollapse::Time> armed_for_;
  std::set<int> gone_;  // consoles that failed (EPIPE)
};

}  // namespace mxrun
