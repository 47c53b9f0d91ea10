#pragma once
// Learning-rate schedule as a pure function of training progress measured in epochs (samples
// seen / training-set size), so it is the same whatever the world size and after a resume.

#include <vector>

namespace mxrun::trainer {

enum class ScheduleKind { kCosine, kStep, kConstant };

struct LrSchedule {
  double base_lr = 0.1;
  double warmup_epochs = 0;  // linear ramp from base_lr / (warmup steps) up to base_lr
  double total_epochs = 1;
  ScheduleKind kind = ScheduleKind::kCosine;
  std::vector<double> milestones;  // step: epochs at which lr is multiplied by gamma
  double gamma = 0.1;

  double At(double epoch) const;
};

}  // namespace mxrun::trainer
