#include "agent/event_log_observer.h"

namespace mxrun {

void EventLogObserver::RoundStarted(Time now, const RoundAssignment& round,
                                    const std::vector<WorkerGroup::WorkerStatus>& workers) {
  if (!events_.enabled()) return;
  events_.SetRound(round);
  events_.Agent("RENDEZVOUS", std::chrono::duration<double, std::milli>(now - joined_at_).count());
  events_.Agent("ASSIGN_WORKER_RANKS", 0.0);  // ranks come with the round
  for (const WorkerGroup::WorkerStatus& worker : workers) {
    if (worker.running) events_.Worker("START", worker.local_rank, worker.pid);
  }
}

void EventLogObserver::WorkerFailed(Time, const WorkerFailure& failure) {
  // torchelastic's exit code: negative for a signal; none for a hung worker still running.
  std::optional<int> exit_code;
  if (failure.term_signal != 0) {
    exit_code = -failure.term_signal;
  } else if (!failure.hang.hung()) {
    exit_code = failure.exit_code;
  }
  events_.Worker("FAILED", failure.local_rank, failure.pid, exit_code,
                 failure.error_file_contents.empty()
                     ? std::nullopt
                     : std::optional<std::string>(failure.error_file_contents));
}

void EventLogObserver::WorkersStopped(Time,
                                      const std::vector<WorkerGroup::WorkerStatus>& were_running) {
  for (const WorkerGroup::WorkerStatus& worker : were_running) {
    events_.Worker("TERMINATED", worker.local_rank, worker.pid);
  }
}

void EventLogObserver::GroupSucceeded(Time, const std::vector<WorkerGroup::WorkerStatus>& workers) {
  for (const WorkerGroup::WorkerStatus& worker : workers) {
    events_.Worker("SUCCEEDED", worker.local_rank, worker.pid, 0);
  }
}

void EventLogObserver::Exited(Time, int, const std::optional<std::string>& why_failed) {
  if (why_failed) {
    events_.Agent("FAILED", std::nullopt, why_failed);
  } else {
    events_.Agent("SUCCEEDED");  // as torchelastic: the agent ran to the end, whatever its workers
  }
}

}  // namespace mxrun
