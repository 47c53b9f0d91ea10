#pragma once
// One epoll loop for everything the agent waits on: worker output pipes, signals (through a
// signalfd, so no work is done in a signal handler) and child exits (SIGCHLD on the same signalfd,
// and a pidfd per watched child: see WatchChild).
// Single-threaded: every callback runs on the thread that calls RunOnce.

#include <signal.h>
#include <sys/types.h>

#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "agent/process/timer_queue.h"
#include "agent/process/turn_hooks.h"

namespace mxrun {

class EventLoop {
 public:
  using Callback = std::function<void()>;
  using Deadline = std::chrono::steady_clock::time_point;

  // Blocks `signals` for the calling thread and routes them to `on_signal`. SIGCHLD should be among
  // them. Errors: Internal when epoll or signalfd cannot be created.
  static absl::StatusOr<std::unique_ptr<EventLoop>> Create(
      const std::vector<int>& signals, std::function<void(int signo)> on_signal);
  ~EventLoop();
  EventLoop(const EventLoop&) = delete;
  EventLoop& operator=(const EventLoop&) = delete;

  // Calls `on_readable` whenever `fd` is readable or hung up. The fd stays owned by the caller.
  void Watch(int fd, Callback on_readable);
  void Unwatch(int fd);

  // Reports `pid`'s exit as a SIGCHLD to `on_signal`, through a pidfd, whoever takes the signal
  // itself: a thread that a library starts with SIGCHLD unblocked (the NVIDIA driver's, once NVML
  // is loaded) can take the process's SIGCHLD before the signalfd sees it, and the exit would go
  // unnoticed. A no-op where pidfds are missing (Linux before 5.3): SIGCHLD alone then.
  void WatchChild(pid_t pid);

  // Timers: `callback` at `when` (At), or at `first` and every `period` after (Every). They run on
  // the loop's thread from RunOnce, which wakes for them; Cancel removes one (from a callback too).
  using TimerId = TimerQueue::Id;
  TimerId At(Deadline when, Callback callback) { return timers_.At(when, std::move(callback)); }
  TimerId Every(Deadline first, std::chrono::milliseconds period, Callback callback) {
    return timers_.Every(first, period, std::move(callback));
  }
  void Cancel(TimerId id) { timers_.Cancel(id); }

  // `callback` after each turn of the agent's loop (turn_hooks.h), until the returned handle is
  // destroyed. EndTurn runs them, and only the agent's outermost loop calls it: RunOnce never
  // does, so a nested wait never re-enters a hook.
  [[nodiscard]] TurnHooks::Hook AfterEachTurn(Callback callback) {
    return turn_hooks_.Add(std::move(callback));
  }
  void EndTurn() { turn_hooks_.RunAll(); }

  // Waits for events until one batch has been handled, a timer was due, or `deadline` passed
  // (nullopt: no deadline but the timers'); then runs the timers that are due.
  void RunOnce(std::optional<Deadline> deadline);

 private:
  EventLoop(int epoll_fd, int signal_fd, std::function<void(int)> on_signal);
  void DrainSignals();

  int epoll_fd_;
  int signal_fd_;
  std::function<void(int)> on_signal_;
  std::map<int, Callback> callbacks_;
  std::vector<int> child_fds_;  // WatchChild's pidfds still open
  TimerQueue timers_;
  TurnHooks turn_hooks_;
};

}  // namespace mxrun
