#pragma once
// One line instead of world-size copies (issue 37, item 2): a console line that several ranks of
// this node print within a window goes out once, with the ranks that said it ("[n0 r1-7]
// UserWarning: ..."). Pure: lines in with their times, lines out; console_collapser.h is its
// shell on the agent's loop (a timer, the writes).
//
// Every console line waits `window` from the moment its first copy came, then goes out, in the
// order the lines came: no line waits longer, and a rank's own lines keep their order (a copy
// joins an earlier pending line only when its rank has nothing pending after that line; a rank
// repeating itself is not collapsed). Memory: at most kMaxPendingBytes of pending text; beyond
// it the oldest lines go out early. Only the console: log files keep every rank's every line.

#include <chrono>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace mxrun {

// Who printed a line, and which console it is for.
struct ConsoleSource {
  int console_fd = -1;
  bool is_stderr = false;
  int node_rank = 0;
  int global_rank = 0;
  int local_rank = 0;
};

// A line to print once, for every rank that said it.
struct CollapsedLine {
  int console_fd = -1;
  bool is_stderr = false;
  int node_rank = 0;
  std::vector<int> ranks;        // global ranks, ascending
  std::vector<int> local_ranks;  // ascending
  std::string text;
};

class ConsoleCollapse {
 public:
  using Time = std::chrono::steady_clock::time_point;
  static constexpr size_t kMaxPendingBytes = 1 << 20;

  explicit ConsoleCollapse(std::chrono::milliseconds window) : window_(window) {}

  void Offer(Time now, const ConsoleSource& from, std::string_view line);
  // The lines due by `now` (and the oldest beyond the memory bound), in order.
  std::vector<CollapsedLine> TakeDue(Time now);
  // Everything pending, in order (a worker failed, the group ends).
  std::vector<CollapsedLine> TakeAll();
  // When the oldest pending line is due; nullopt when none is pending.
  std::optional<Time> NextDue() const;
  size_t pending_bytes() const { return bytes_; }

 private:
  struct Pending {
    Time due;
    CollapsedLine line;
  };
  Pending* Find(uint64_t seq);  // nullptr once it went out
  CollapsedLine PopFront();

  std::chrono::milliseconds window_;
  std::deque<Pending> pending_;  // pending_[i] has sequence number first_seq_ + i
  uint64_t first_seq_ = 0;
  // The newest pending line with a given console, stream and text; the newest pending line of
  // each rank (both may name lines gone out: Find says).
  std::unordered_map<std::string, uint64_t> latest_;
  std::unordered_map<int, uint64_t> last_of_rank_;
  size_t bytes_ = 0;
};

// "3", "1-7", "0,2,4-7": ascending ranks, runs of three or more as a range.
std::string RankList(const std::vector<int>& ranks);

}  // namespace mxrun
