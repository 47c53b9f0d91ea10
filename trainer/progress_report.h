#pragma once
// The trainer's progress reports to mxrun (common/control_protocol.h: {"step": N,
// "step_seconds": S} on the control channel, MXRUN_CONTROL_FD), from which the agent's metrics
// show each rank's step, step time and heartbeat age. At most one report per kMinInterval: a fast
// step's report carries the mean time of the steps since the last one. Without the variable
// (another launcher, or run alone) there is nothing to report to. No LibTorch.

#include <chrono>
#include <memory>
#include <optional>

#include "common/env_contract.h"

namespace mxrun::trainer {

class ProgressReport {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr std::chrono::milliseconds kMinInterval{50};

  // nullptr when MXRUN_CONTROL_FD is unset; throws std::invalid_argument when it is not a socket.
  static std::unique_ptr<ProgressReport> FromEnvironment(const EnvMap& env);
  explicit ProgressReport(int fd) : fd_(fd) {}

  // Step `step` is complete (at `now`).
  void Step(long long step, Clock::time_point now = Clock::now());
  // The steps before this moment do not measure the next one (a restore, a re-formed group, an
  // evaluation or checkpoint in between): the next report's step time is not known.
  void Restart(Clock::time_point now = Clock::now());

 private:
  int fd_;
  std::optional<Clock::time_point> since_;  // the last step counted from
  long long since_step_ = -1;
  Clock::time_point last_sent_{};
};

}  // namespace mxrun::trainer
