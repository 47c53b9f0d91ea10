#pragma once
// Deciding that a worker is stuck in uninterruptible sleep (Linux's D state: a driver, a hung file
// system, a GPU that stopped answering), as a pure object: torchrun 2.13's
// TORCHELASTIC_UNINTERRUPTIBLE_STATE_TIMEOUT. The agent reads each running worker's state letter
// from /proc/<pid>/stat at every poll and feeds the pass here with its time; no I/O, no clock of
// its own, so tests drive it with fake times.
//
// Per worker (by local rank and pid), as torchrun's `_update_uninterruptible_dwell`:
//   not in D --(seen in D)--> in D since `now` (an "entered" notice)
//   in D     --(seen in another state)--> not in D (the time is forgotten)
//   in D     --(seen in D, now - since >= timeout)--> stuck: one verdict, never another
// A state that could not be read changes nothing (torchrun: None keeps the bookkeeping); a worker
// missing from a pass has ended and is forgotten. The time counts from the first pass that saw the
// worker in D, so it is measured to within one poll interval.

#include <sys/types.h>

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace mxrun {

inline constexpr char kUninterruptibleTimeoutEnv[] = "TORCHELASTIC_UNINTERRUPTIBLE_STATE_TIMEOUT";

// The variable's value as torchrun reads it: seconds as a float; empty, 0 or negative turns the
// check off (0 ms). Unlike torchrun, which turns it off silently, text that is not a number (NaN
// included) is an InvalidArgument error, so that the caller can say so (and then turn it off).
// Infinity and anything above 1e9 s are 1e9 s (on, never firing); a positive value below 1 ms is
// 1 ms.
absl::StatusOr<std::chrono::milliseconds> ParseUninterruptibleTimeout(std::string_view text);

// How often the agent polls the workers' states: a tenth of the timeout, within [100 ms, 1 s].
std::chrono::milliseconds UninterruptiblePollPeriod(std::chrono::milliseconds timeout);

class UninterruptibleWatch {
 public:
  using Time = std::chrono::steady_clock::time_point;

  // One worker's state in one pass. `state` is the letter from /proc/<pid>/stat; '\0' when it
  // could not be read.
  struct Observation {
    int local_rank = 0;
    pid_t pid = 0;
    char state = '\0';
  };
  struct Entered {  // seen in D for the first time (since it last left D)
    int local_rank = 0;
    pid_t pid = 0;
  };
  struct Stuck {  // in D for at least the timeout: hung
    int local_rank = 0;
    pid_t pid = 0;
    std::chrono::milliseconds in_d{0};
    std::string detail;  // "in D state for 12.3 s, at least TORCHELASTIC_..._TIMEOUT=10 s"
  };
  struct Verdicts {
    std::vector<Entered> entered;  // by local rank
    std::vector<Stuck> stuck;      // the longest in D first, then by local rank
  };

  // `timeout` 0: off (Observe then tracks nothing and judges nothing).
  explicit UninterruptibleWatch(std::chrono::milliseconds timeout) : timeout_(timeout) {}
  bool enabled() const { return timeout_.count() > 0; }
  std::chrono::milliseconds timeout() const { return timeout_; }

  // A new group: forgets every worker.
  void Reset() { workers_.clear(); }
  // One poll of every running worker at `now`.
  Verdicts Observe(const std::vector<Observation>& pass, Time now);
  // When a worker now in D reaches the timeout, were it still in D then; nullopt: none is in D.
  std::optional<Time> NextDeadline() const;

 private:
  struct Worker {
    pid_t pid = 0;
    std::optional<Time> since;  // in D since; nullopt: not in D
    bool judged = false;
  };

  std::chrono::milliseconds timeout_;
  std::map<int, Worker> workers_;  // by local rank
};

}  // namespace mxrun
