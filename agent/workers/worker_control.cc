#include "agent/workers/worker_control.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <stdexcept>

#include "absl/strings/str_cat.h"
#include "common/strings.h"
#include "spdlog/spdlog.h"

namespace mxrun {

absl::StatusOr<std::unique_ptr<WorkerControl>> WorkerControl::Create() {
  int fds[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, fds) != 0) {
    return absl::InternalError(
        absl::StrCat("cannot create a worker's control channel: ", ErrnoText(errno)));
  }
  // The worker's end blocks: a worker reading it (from a thread) waits for the next notice.
  int flags = fcntl(fds[1], F_GETFL);
  if (flags >= 0) fcntl(fds[1], F_SETFL, flags & ~O_NONBLOCK);
  return std::unique_ptr<WorkerControl>(new WorkerControl(fds[0], fds[1]));
}

WorkerControl::~WorkerControl() {
  if (lines_.unlogged_drops() > 0) {
    spdlog::warn("{}: {} more control messages were dropped ({} in all)", who_,
                 lines_.unlogged_drops(), lines_.drops());
  }
  CloseChildEnd();
  if (agent_fd_ >= 0) close(agent_fd_);
}

void WorkerControl::CloseChildEnd() {
  if (child_fd_ >= 0) close(child_fd_);
  child_fd_ = -1;
}

bool WorkerControl::OnReadable() {
  char buffer[4096];
  // Bounded, as the output relay's reads: a worker writing without pause cannot hold the agent's
  // loop; what is left is read at the loop's next turn.
  for (int reads = 0; reads < kMaxReadsPerWakeup; ++reads) {
    const ssize_t n = read(agent_fd_, buffer, sizeof(buffer));
    if (n > 0) {
      lines_.Feed(
          std::string_view(buffer, static_cast<size_t>(n)),
          [&](std::string_view line) { OnLine(line); },
          [&](size_t bytes) {
            Drop(absl::StrCat("a line of ", bytes, " bytes, over the ", kMaxControlLine,
                              " accepted"));
          });
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
    return false;  // end of stream (the worker closed it or exited) or an error
  }
  return true;
}

void WorkerControl::OnLine(std::string_view line) {
  if (line.empty()) return;
  try {
    const WorkerControlMessage message = ParseWorkerControlLine(line);
    if (message.kind == WorkerControlMessage::Kind::kHello) {
      in_process_restart_ = message.in_process_restart;
      spdlog::log(
          standby_ ? spdlog::level::info : spdlog::level::debug, "{}: {} (control protocol {})",
          who_,
          in_process_restart_ ? "ready to take a rank in-process" : "declines in-process restart",
          message.version);
    } else if (message.kind == WorkerControlMessage::Kind::kJoined) {
      joined_round_ = message.round;
    } else if (message.kind == WorkerControlMessage::Kind::kLeaving) {
      leaving_ = true;
    } else if (progress_sink_) {
      progress_sink_(message);
    }
  } catch (const std::invalid_argument& e) {
    Drop(e.what());
  }
}

void WorkerControl::Drop(std::string_view reason) {
  const std::string warning = lines_.Dropped(who_, reason);
  if (!warning.empty()) spdlog::warn("{}", warning);
}

bool WorkerControl::Send(const RoundNotice& notice) {
  // False also when a worker that reads nothing has filled its buffer.
  return SendControlLine(agent_fd_, RoundNoticeLine(notice));
}

}  // namespace mxrun
