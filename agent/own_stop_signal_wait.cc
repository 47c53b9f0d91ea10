#include "agent/own_stop_signal_wait.h"

#include <signal.h>

namespace mxrun {

bool OwnStopSignalWait::EndedByStopSignal(const WorkerFailure& failure) {
  if (failure.term_signal != 0)
    return failure.term_signal == SIGTERM || failure.term_signal == SIGINT;
  return failure.exit_code == 128 + SIGTERM || failure.exit_code == 128 + SIGINT;
}

OwnStopSignalWait::Verdict OwnStopSignalWait::Check(Time now, const WorkerFailure& failure,
                                                    bool own_signal_received) {
  if (wait_.count() <= 0) return Verdict::kJudge;
  if (own_signal_received) return Verdict::kWait;
  if (!EndedByStopSignal(failure)) return Verdict::kJudge;
  if (!deadline_) {
    deadline_ = now + wait_;
    return Verdict::kBegin;
  }
  return now < *deadline_ ? Verdict::kWait : Verdict::kJudge;
}

}  // namespace mxrun
