#include "trainer/progress_report.h"

#include "common/control_protocol.h"
#include "trainer/control_channel.h"

namespace mxrun::trainer {

std::unique_ptr<ProgressReport> ProgressReport::FromEnvironment(const EnvMap& env) {
  const int fd = ControlFdFromEnvironment(env);
  if (fd < 0) return nullptr;
  return std::make_unique<ProgressReport>(fd);
}

void ProgressReport::Step(long long step, Clock::time_point now) {
  if (since_ && step > since_step_ && now - last_sent_ < kMinInterval) return;  // not yet
  double seconds = -1;
  if (since_ && step > since_step_) {
    seconds = std::chrono::duration<double>(now - *since_).count() /
              static_cast<double>(step - since_step_);
  }
  SendControlLine(fd_, ProgressLine(step, seconds));
  last_sent_ = now;
  since_ = now;
  since_step_ = step;
}

void ProgressReport::Restart(Clock::time_point /*now*/) {
  since_.reset();
  since_step_ = -1;
}

}  // namespace mxrun::trainer
