#pragma once
// Relays one worker stream (stdout or stderr) from its pipe to the console and/or a log file.
// Console lines name the node and global rank ("[n0 r3] ", or JSON objects) and are written whole,
// one write per line, so lines of different workers never interleave mid-line. The log file gets
// the raw bytes. The last lines of each worker are kept for the failure summary.

#include <deque>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace mxrun {

class ConsoleCollapser;

// Splits a byte stream into lines. Pure; no I/O.
class LineAssembler {
 public:
  // Lines longer than this are emitted in pieces, so one endless line cannot grow memory unbounded.
  static constexpr size_t kMaxLine = 64 * 1024;

  // Calls `emit` with every complete line in `data` (without its '\n').
  void Feed(std::string_view data, const std::function<void(std::string_view)>& emit);
  // Emits the unterminated rest, if any (at end of stream).
  void Flush(const std::function<void(std::string_view)>& emit);

 private:
  std::string partial_;
};

// The last `capacity` lines a worker printed, both streams together.
class LastLines {
 public:
  explicit LastLines(size_t capacity) : capacity_(capacity) {}
  void Add(std::string_view line);
  std::vector<std::string> Lines() const { return {lines_.begin(), lines_.end()}; }

 private:
  size_t capacity_;
  std::deque<std::string> lines_;
};

// torchrun 2.x's --duplicate-*-filters: lines of every worker of an attempt that contain one of
// `filters` also go, prefixed as on a text console, to one file (attempt_<N>/filtered_std*.log).
struct LineDuplicate {
  int fd = -1;  // owned by the worker group; -1: off
  std::vector<std::string> filters;
};

// Where one worker stream goes, and the worker it belongs to. A console line is
// "[n<node_rank> r<global_rank>] <line>", or with `json` one object per line:
// {"node":0,"rank":3,"local_rank":1,"stream":"stdout","line":"..."}. With a `prefix_template`
// (line_prefix.h) the text prefix is the template expanded, and a JSON object carries it as
// "prefix".
struct RelayTarget {
  int console_fd = -1;  // -1: not shown on the console
  int file_fd = -1;     // -1: no log file
  int node_rank = 0;
  int global_rank = 0;
  int local_rank = 0;
  bool is_stderr = false;
  bool json = false;
  std::string prefix_template;               // empty: mxrun's "[n<node> r<rank>] "
  std::string role;                          // ${role_name}
  std::string host_name;                     // ${hostname}
  const LineDuplicate* duplicate = nullptr;  // not owned; nullptr: none
  // Console lines go through it (one line for the ranks that print the same); not owned;
  // nullptr: written at once. A standby's lines (no rank yet) are always written at once.
  ConsoleCollapser* collapse = nullptr;
};

class OutputRelay {
 public:
  // Takes ownership of `pipe_fd` (made non-blocking); `last_lines` must outlive the relay.
  OutputRelay(int pipe_fd, RelayTarget target, LastLines* last_lines);
  ~OutputRelay();
  OutputRelay(const OutputRelay&) = delete;
  OutputRelay& operator=(const OutputRelay&) = delete;

  int fd() const { return pipe_fd_; }
  // The worker kept its process but has a new place (a group re-formed in-process, or a standby
  // given a rank); SetFile replaces the log file (-1: none), taking ownership of the fd.
  void Retarget(int node_rank, int global_rank, int local_rank);
  void SetFile(int file_fd);
  bool open() const { return pipe_fd_ >= 0; }
  // Reads what is available. Returns false once the stream is at its end (and then closes it).
  bool OnReadable();
  // Reads until EOF or until nothing more is available; then flushes and closes the stream.
  void DrainAndClose();

 private:
  enum class ReadResult { kData, kWouldBlock, kEnd };
  ReadResult ReadOnce();
  void MakePrefix();
  void EmitLine(std::string_view line);
  void NoteFileWriteFailed(int error);
  void Close();

  int pipe_fd_;
  RelayTarget target_;
  std::string line_prefix_;  // what comes before each console line (made once)
  std::string text_prefix_;  // the text console's prefix, for the filtered file
  LastLines* last_lines_;
  LineAssembler assembler_;
  bool file_write_failed_ = false;  // said once per log file
};

// Writes all of `data` to `fd`, retrying on EINTR and short writes. False on error (EPIPE, ...).
bool WriteAll(int fd, std::string_view data);

}  // namespace mxrun
