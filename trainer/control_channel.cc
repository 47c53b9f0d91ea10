#include "trainer/control_channel.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <stdexcept>

namespace mxrun::trainer {

int ControlFdFromEnvironment(const EnvMap& env) {
  auto it = env.find(kControlFdVariable);
  if (it == env.end() || it->second.empty()) return -1;
  int fd = -1;
  try {
    size_t used = 0;
    fd = std::stoi(it->second, &used);
    if (used != it->second.size()) fd = -1;
  } catch (const std::exception&) {
    fd = -1;
  }
  struct stat st {};
  if (fd < 0 || fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode)) {
    throw std::invalid_argument(std::string(kControlFdVariable) + "=" + it->second +
                                " is not an open socket (the launcher's control channel)");
  }
  return fd;
}

std::unique_ptr<ControlChannel> ControlChannel::FromEnvironment(const EnvMap& env) {
  const int fd = ControlFdFromEnvironment(env);
  if (fd < 0) return nullptr;
  return std::unique_ptr<ControlChannel>(new ControlChannel(fd));
}

ControlChannel::ControlChannel(int fd) : fd_(fd) {
  reader_ = std::thread([this] { ReadLoop(); });
}

void ControlChannel::Hello() { SendControlLine(fd_, HelloLine(/*in_process_restart=*/true)); }

bool ControlChannel::closed() {
  std::lock_guard<std::mutex> lock(mutex_);
  return closed_;
}

ControlChannel::~ControlChannel() {
  shutdown(fd_, SHUT_RDWR);  // wakes the reader with end of stream
  if (reader_.joinable()) reader_.join();
  close(fd_);
}

void ControlChannel::ReadLoop() {
  std::string buffer;
  char chunk[4096];
  for (;;) {
    const ssize_t n = read(fd_, chunk, sizeof(chunk));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    buffer.append(chunk, static_cast<size_t>(n));
    size_t end;
    while ((end = buffer.find('\n')) != std::string::npos) {
      const std::string line = buffer.substr(0, end);
      buffer.erase(0, end + 1);
      try {
        RoundNotice notice = ParseRoundNoticeLine(line);
        std::lock_guard<std::mutex> lock(mutex_);
        notice_ = std::move(notice);  // a newer round supersedes one not yet taken
        pending_.store(true, std::memory_order_release);
        changed_.notify_all();
      } catch (const std::invalid_argument& e) {
        std::fprintf(stderr, "train: ignoring a control line from the launcher: %s\n", e.what());
      }
    }
    if (buffer.size() > kMaxControlLine) buffer.clear();  // never a line: drop it
  }
  std::lock_guard<std::mutex> lock(mutex_);
  closed_ = true;
  changed_.notify_all();
}

std::optional<RoundNotice> ControlChannel::TakeRound(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait_for(lock, timeout, [this] { return notice_.has_value() || closed_; });
  std::optional<RoundNotice> taken = std::move(notice_);
  notice_.reset();
  pending_.store(false, std::memory_order_release);
  return taken;
}

// A failed send means the agent is gone: it will not keep this worker anyway.
void ControlChannel::Joined(int round) { SendControlLine(fd_, JoinedLine(round)); }

}  // namespace mxrun::trainer
