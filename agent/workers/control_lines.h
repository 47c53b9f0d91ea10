#pragma once
// A worker's control channel read as lines (common/control_protocol.h), held against a worker
// that abuses it: a line longer than kMaxControlLine is dropped whole, never parsed (memory stays
// at that bound however long it runs), and what is dropped is said in a few lines, not one per
// message: the first kLoggedDrops drops each get a warning with their reason, later ones are
// counted and the count is said when the channel closes. Pure: no I/O; the caller logs.

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

namespace mxrun {

class ControlLines {
 public:
  static constexpr int kLoggedDrops = 5;

  // Calls `on_line` with each complete line of at most `max_line` bytes (without its '\n'), and
  // `on_oversize` once for each longer one, with its length in bytes (counted up to its '\n').
  void Feed(std::string_view data, const std::function<void(std::string_view)>& on_line,
            const std::function<void(size_t)>& on_oversize);

  // A line was dropped (oversize, or its message refused): the warning to log for it, or empty
  // once kLoggedDrops were logged (the last of them says that further drops are only counted).
  std::string Dropped(std::string_view who, std::string_view reason);
  // Drops not logged so far: said once the channel closes, e.g. "and 9995 more".
  long long unlogged_drops() const { return drops_ > kLoggedDrops ? drops_ - kLoggedDrops : 0; }
  long long drops() const { return drops_; }

  explicit ControlLines(size_t max_line) : max_line_(max_line) {}

 private:
  size_t max_line_;
  std::string partial_;        // an unterminated line, at most max_line_ bytes
  size_t oversize_bytes_ = 0;  // > 0: discarding an oversize line, this many bytes of it so far
  long long drops_ = 0;
};

}  // namespace mxrun
