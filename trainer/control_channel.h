#pragma once
// The trainer's end of mxrun's control channel (common/control_protocol.h). It says hello: this
// worker takes a re-formed group's new round in-process. A reader thread keeps the
// latest round notice; the training loop asks RoundPending() between steps and while it waits on
// a collective, and TakeRound() after a collective failed. Without MXRUN_CONTROL_FD (another
// launcher, or run alone) there is no channel and the trainer behaves as before. No LibTorch.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "common/control_protocol.h"

namespace mxrun::trainer {

// The file descriptor MXRUN_CONTROL_FD names in `env`; -1 when it is unset. Throws
// std::invalid_argument when it is set but not an open socket.
int ControlFdFromEnvironment(const EnvMap& env);

class ControlChannel {
 public:
  // The channel named by MXRUN_CONTROL_FD in `env`; nullptr when it is unset. Throws
  // std::invalid_argument when it is set but not an open socket.
  static std::unique_ptr<ControlChannel> FromEnvironment(const EnvMap& env);
  ~ControlChannel();
  ControlChannel(const ControlChannel&) = delete;
  ControlChannel& operator=(const ControlChannel&) = delete;

  // A notice is waiting (cheap: one atomic load; safe from any thread).
  bool RoundPending() const { return pending_.load(std::memory_order_acquire); }
  // Takes the newest notice, waiting up to `timeout` for one; nullopt when none came or the
  // agent closed the channel.
  std::optional<RoundNotice> TakeRound(std::chrono::milliseconds timeout);
  // Says this worker takes new rounds in-process (a standby: that it is ready for a rank).
  void Hello();
  // Tells the agent this worker has joined round `round`'s group.
  void Joined(int round);
  // The agent closed the channel (it is ending the job).
  bool closed();

 private:
  explicit ControlChannel(int fd);
  void ReadLoop();

  int fd_;
  std::thread reader_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::optional<RoundNotice> notice_;  // guarded by mutex_
  bool closed_ = false;                // guarded by mutex_
  std::atomic<bool> pending_{false};
};

}  // namespace mxrun::trainer
