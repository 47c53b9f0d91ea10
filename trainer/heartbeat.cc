#include "trainer/heartbeat.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace mxrun::trainer {

Heartbeat::Heartbeat(std::string path) : path_(std::move(path)) {}

Heartbeat::~Heartbeat() {
  if (fd_ >= 0) close(fd_);
}

void Heartbeat::Beat() {
  if (path_.empty()) return;
  std::lock_guard<std::mutex> lock(mutex_);
  const auto now = std::chrono::steady_clock::now();
  if (last_ != std::chrono::steady_clock::time_point{} && now - last_ < kMinInterval) return;
  last_ = now;
  Touch();
}

void Heartbeat::Touch() {
  // The file is created by the first beat (mxrun counts a worker only once it has beaten), then
  // only its time stamp changes.
  if (fd_ < 0) fd_ = open(path_.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ >= 0 && futimens(fd_, nullptr) == 0) return;
  if (!warned_) {  // hang detection would then misjudge this worker: say so once
    warned_ = true;
    std::fprintf(stderr, "train: cannot touch MXRUN_HEARTBEAT_FILE=%s: %s\n", path_.c_str(),
                 std::strerror(errno));
  }
}

Heartbeat::KeepAlive::KeepAlive(Heartbeat& heartbeat, std::chrono::milliseconds period)
    : heartbeat_(heartbeat) {
  if (heartbeat_.path_.empty()) return;
  heartbeat_.Beat();
  thread_ = std::thread([this, period] {
    std::unique_lock<std::mutex> lock(mutex_);
    while (!stop_.wait_for(lock, period, [this] { return stopping_; })) heartbeat_.Beat();
  });
}

Heartbeat::KeepAlive::~KeepAlive() {
  if (!thread_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  stop_.notify_one();
  thread_.join();
  heartbeat_.Beat();
}

}  // namespace mxrun::trainer
