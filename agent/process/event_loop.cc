#include "agent/process/event_loop.h"

#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/strings.h"

namespace mxrun {

absl::StatusOr<std::unique_ptr<EventLoop>> EventLoop::Create(const std::vector<int>& signals,
                                                             std::function<void(int)> on_signal) {
  sigset_t mask;
  sigemptyset(&mask);
  for (int sig : signals) sigaddset(&mask, sig);
  if (sigprocmask(SIG_BLOCK, &mask, nullptr) != 0) {
    return absl::InternalError(absl::StrCat("sigprocmask: ", ErrnoText(errno)));
  }
  int signal_fd = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
  if (signal_fd < 0) return absl::InternalError(absl::StrCat("signalfd: ", ErrnoText(errno)));
  int epoll_fd = epoll_create1(EPOLL_CLOEXEC);
  if (epoll_fd < 0) {
    close(signal_fd);
    return absl::InternalError(absl::StrCat("epoll_create1: ", ErrnoText(errno)));
  }
  std::unique_ptr<EventLoop> loop(new EventLoop(epoll_fd, signal_fd, std::move(on_signal)));
  loop->Watch(signal_fd, [raw = loop.get()] { raw->DrainSignals(); });
  return loop;
}

EventLoop::EventLoop(int epoll_fd, int signal_fd, std::function<void(int)> on_signal)
    : epoll_fd_(epoll_fd), signal_fd_(signal_fd), on_signal_(std::move(on_signal)) {}

EventLoop::~EventLoop() {
  for (int fd : child_fds_) close(fd);
  close(signal_fd_);
  close(epoll_fd_);
}

void EventLoop::Watch(int fd, Callback on_readable) {
  epoll_event event{};
  event.events = EPOLLIN;
  event.data.fd = fd;
  if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &event) != 0 && errno == EEXIST) {
    epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, fd, &event);
  }
  callbacks_[fd] = std::move(on_readable);
}

void EventLoop::Unwatch(int fd) {
  epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
  callbacks_.erase(fd);
}

void EventLoop::WatchChild(pid_t pid) {
  const int fd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));  // close-on-exec by nature
  if (fd < 0) return;
  child_fds_.push_back(fd);
  Watch(fd, [this, fd] {
    Unwatch(fd);
    close(fd);
    child_fds_.erase(std::remove(child_fds_.begin(), child_fds_.end(), fd), child_fds_.end());
    on_signal_(SIGCHLD);  // the handler reaps with waitpid(WNOHANG): one more call is harmless
  });
}

void EventLoop::RunOnce(std::optional<Deadline> deadline) {
  if (std::optional<Deadline> timer = timers_.Next(); timer && (!deadline || *timer < *deadline)) {
    deadline = timer;
  }
  int timeout_ms = -1;
  if (deadline) {
    auto left =
        std::chrono::ceil<std::chrono::milliseconds>(*deadline - std::chrono::steady_clock::now());
    timeout_ms = left.count() < 0 ? 0 : static_cast<int>(std::min<long>(left.count(), 1 << 30));
  }
  epoll_event events[64];
  int n = epoll_wait(epoll_fd_, events, 64, timeout_ms);
  for (int i = 0; i < n; ++i) {
    auto it = callbacks_.find(events[i].data.fd);
    if (it == callbacks_.end()) continue;  // unwatched by an earlier callback in this batch
    Callback callback = it->second;        // a copy: the callback may unwatch itself
    callback();
  }
  timers_.RunDue(std::chrono::steady_clock::now());
}

void EventLoop::DrainSignals() {
  signalfd_siginfo info;
  while (read(signal_fd_, &info, sizeof info) == sizeof info) {
    on_signal_(static_cast<int>(info.ssi_signo));
  }
}

}  // namespace mxrun
