#pragma once
// The trainer's side of mxrun's hang detection (--hang_timeout): it touches the file named by
// MXRUN_HEARTBEAT_FILE whenever it makes progress (after every step and evaluation batch, and every
// second while a checkpoint is written). Without that variable (hang detection off, another
// launcher) every call is a no-op. No LibTorch here.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

namespace mxrun::trainer {

class Heartbeat {
 public:
  // `path` empty: no heartbeat.
  explicit Heartbeat(std::string path);
  const std::string& path() const { return path_; }
  ~Heartbeat();
  Heartbeat(const Heartbeat&) = delete;
  Heartbeat& operator=(const Heartbeat&) = delete;

  // Touches the file, at most once per `min_interval` (a beat costs a system call; a fast GPU
  // step must not pay it on a network file system every few milliseconds). Thread-safe.
  void Beat();

  // Beats every `period` from a helper thread while it lives: for one long call that must not look
  // like a hang (a checkpoint write).
  class KeepAlive {
   public:
    KeepAlive(Heartbeat& heartbeat, std::chrono::milliseconds period);
    ~KeepAlive();
    KeepAlive(const KeepAlive&) = delete;
    KeepAlive& operator=(const KeepAlive&) = delete;

   private:
    Heartbeat& heartbeat_;
    std::mutex mutex_;
    std::condition_variable stop_;
    bool stopping_ = false;
    std::thread thread_;
  };

  static constexpr std::chrono::milliseconds kMinInterval{100};

 private:
  void Touch();

  std::string path_;
  int fd_ = -1;
  std::mutex mutex_;
  std::chrono::steady_clock::time_point last_{};
  bool warned_ = false;
};

}  // namespace mxrun::trainer
