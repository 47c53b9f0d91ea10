#pragma once
// The agent's end of one worker's control channel (common/control_protocol.h): a socket pair made
// before the spawn, the worker's end inherited as fd 3. The agent's loop reads the worker's lines
// (hello, joined, progress) and the group sends round notices through it. Single-threaded.

#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "agent/workers/control_lines.h"
#include "common/control_protocol.h"

namespace mxrun {

class WorkerControl {
 public:
  static absl::StatusOr<std::unique_ptr<WorkerControl>> Create();
  ~WorkerControl();
  WorkerControl(const WorkerControl&) = delete;
  WorkerControl& operator=(const WorkerControl&) = delete;

  int fd() const { return agent_fd_; }        // watch for readable
  int child_fd() const { return child_fd_; }  // SpawnRequest::control_fd
  void CloseChildEnd();                       // after the spawn: the worker holds its end now

  // Names the worker in log lines; a standby's hello is logged at info (it is news: a spare is
  // ready), a worker's at debug.
  void Describe(std::string who, bool standby) {
    who_ = std::move(who);
    standby_ = standby;
  }
  // Reads what the worker sent, without blocking and at most kMaxReadsPerWakeup reads (the rest at
  // the next call); returns false at end of stream or on error (stop watching). A malformed or
  // oversize line is dropped: the first few with a warning each, then counted (control_lines.h).
  bool OnReadable();
  static constexpr int kMaxReadsPerWakeup = 16;

  // Called with every valid progress report ({"step": N, ...}) the worker sends.
  void OnProgress(std::function<void(const WorkerControlMessage&)> sink) {
    progress_sink_ = std::move(sink);
  }

  bool in_process_restart() const { return in_process_restart_; }
  int joined_round() const { return joined_round_; }
  // It said {"leaving": true}: its interpreter is exiting (survivors_leave.h).
  bool leaving() const { return leaving_; }

  // Sends the notice without blocking; false when the worker's end is closed or full (then the
  // worker cannot be kept).
  bool Send(const RoundNotice& notice);

 private:
  WorkerControl(int agent_fd, int child_fd) : agent_fd_(agent_fd), child_fd_(child_fd) {}
  void OnLine(std::string_view line);
  void Drop(std::string_view reason);
  int agent_fd_ = -1;
  int child_fd_ = -1;
  ControlLines lines_{kMaxControlLine};
  bool in_process_restart_ = false;
  bool standby_ = false;
  std::string who_ = "a worker";
  int joined_round_ = -1;
  bool leaving_ = false;
  std::function<void(const WorkerControlMessage&)> progress_sink_;
};

}  // namespace mxrun
