#include "common/worker_failure.h"

#include "absl/strings/str_cat.h"
#include "common/signal_names.h"

namespace mxrun {

std::string DescribeExit(const WorkerFailure& failure) {
  std::string ended = failure.term_signal > 0 ? DescribeSignal(failure.term_signal)
                                              : absl::StrCat("exit code ", failure.exit_code);
  if (failure.term_signal > 0 && !failure.oom_kill.empty()) {
    absl::StrAppend(&ended, ", ", failure.oom_kill);
  }
  if (!failure.hang.hung()) return ended;
  if (failure.hang.rule == kStragglerRule) {
    return absl::StrCat("stopped as a straggler (--straggler_restart): ", failure.hang.detail);
  }
  std::string text = absl::StrCat("hung (", failure.hang.rule, "): ", failure.hang.detail);
  if (failure.term_signal > 0 || failure.exit_code != 0) absl::StrAppend(&text, ", then ", ended);
  return text;
}

std::string FailureCause(const WorkerFailure& failure) {
  if (failure.hang.rule == kStragglerRule) return "straggler";
  if (failure.hang.hung()) return "hang";
  return failure.term_signal != 0 ? "signal" : "exit";
}

}  // namespace mxrun
