#include "trainer/progress_report.h"

#include <sys/stat.h>

#include <stdexcept>
#include <string>

#include "common/control_protocol.h"

namespace mxrun::trainer {

std::unique_ptr<ProgressReport> ProgressReport::FromEnvironment(const EnvMap& env) {
  auto it = env.find(kControlFdVariable);
  if (it == env.end() || it->second.empty()) return nullptr;
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
