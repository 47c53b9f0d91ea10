#include "common/worker_failure.h"

#include "absl/strings/str_cat.h"
#include "common/signal_names.h"

namespace mxrun {

std::string DescribeExit(const WorkerFailure& failure) {
  if (failure.term_signal > 0) return DescribeSignal(failure.term_signal);
  return absl::StrCat("exit code ", failure.exit_code);
}

}  // namespace mxrun
