#pragma once
// torchelastic's FileTimer protocol, served as torchrun's FileTimerServer serves it: a named pipe
// (TORCHELASTIC_TIMER_FILE) to which each worker's `FileTimerClient` writes one JSON line per
// request, opening the pipe non-blocking, writing and closing it:
//   {"version": 1, "pid": 1234, "scope_id": "train.py#42", "expiration_time": 1700000000.5,
//    "signal": 9}
// A negative expiration_time releases the timer (pid, scope_id). The client refuses to write lines
// over PIPE_BUF bytes, so every line arrives whole even with many writers.
//
// This file reads the lines; hang_watch.h keeps the timers and decides when one expired.

#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "agent/hang/hang_watch.h"

namespace mxrun {

// Longest request line accepted, without its newline: PIPE_BUF, what FileTimerClient allows.
inline constexpr size_t kMaxFileTimerLine = 4096;

// One request line (without its newline). InvalidArgument says what is wrong with it: not JSON,
// a missing or mistyped field, a version other than 1, a pid or signal out of range.
absl::StatusOr<FileTimerRequest> ParseFileTimerLine(std::string_view line);

// The server's end of the pipe. It holds the pipe open for reading (so clients' non-blocking opens
// succeed) and for writing (so the last client closing it does not leave the read end hung up,
// which would make epoll report it readable forever).
class FileTimerPipe {
 public:
  // Creates the pipe at `path`. A named pipe already there (left by an earlier run) is replaced;
  // anything else there is an error (FailedPrecondition), never removed.
  static absl::StatusOr<std::unique_ptr<FileTimerPipe>> Create(const std::string& path);
  ~FileTimerPipe();  // closes both ends and removes the pipe
  FileTimerPipe(const FileTimerPipe&) = delete;
  FileTimerPipe& operator=(const FileTimerPipe&) = delete;

  const std::string& path() const { return path_; }
  int fd() const { return read_fd_; }

  // Reads what the pipe holds and calls `on_line` with each complete line: its request, or why it
  // was refused (oversize lines are refused whole, with their first bytes as `line`).
  void OnReadable(const std::function<void(const absl::StatusOr<FileTimerRequest>&,
                                           std::string_view line)>& on_line);

 private:
  FileTimerPipe(std::string path, int read_fd, int write_fd)
      : path_(std::move(path)), read_fd_(read_fd), write_fd_(write_fd) {}

  std::string path_;
  int read_fd_;
  int write_fd_;
  std::string partial_;    // an unterminated line
  bool oversize_ = false;  // discarding the rest of an oversize line
};

}  // namespace mxrun
