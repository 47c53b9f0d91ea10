#include "trainer/lr_schedule.h"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace mxrun::trainer {

double LrSchedule::At(double epoch) const {
  if (warmup_epochs > 0 && epoch < warmup_epochs) {
    // Never zero: the very first step already moves the weights a little.
    return base_lr * std::max(epoch, 1e-3 * warmup_epochs) / warmup_epochs;
  }
  switch (kind) {
    case ScheduleKind::kConstant:
      return base_lr;
    case ScheduleKind::kStep: {
      double lr = base_lr;
      for (double m : milestones) {
        if (epoch >= m) lr *= gamma;
      }
      return lr;
    }
    case ScheduleKind::kCosine: {
      const double span = std::max(total_epochs - warmup_epochs, 1e-9);
      const double t = std::clamp((epoch - warmup_epochs) / span, 0.0, 1.0);
      return base_lr * 0.5 * (1.0 + std::cos(std::numbers::pi * t));
    }
  }
  return base_lr;
}

}  // namespace mxrun::trainer
