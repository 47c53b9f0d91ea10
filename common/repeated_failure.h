#pragma once
// Is every failure of a job the same one? A job that failed the same way on every attempt (the
// same exit code with the same error, a Python exception or a missing file, say) will fail that
// way again when the scheduler requeues it: mxrun then exits with its "do not requeue" code
// (--do_not_requeue_exit_code, docs/CONTRACT.md) instead of 1. Pure: the rendezvous (local, or
// the master for a multi-node job) is told every failure that spends or ends the budget.
//
// Only failures that look deterministic count: a non-zero exit code with something to compare
// (the error file's message, else the worker's last output line). A signal (an OOM kill, a
// preemption), a hang, a straggler or a node lost may well go another way on other nodes, so one
// of those among the attempts makes the job worth a requeue.

#include <optional>
#include <string>

#include "common/worker_failure.h"

namespace mxrun {

// "exit code 3: ValueError: bad config"; nullopt for a failure that may not repeat.
std::optional<std::string> FailureSignature(const WorkerFailure& failure);

class RepeatedFailures {
 public:
  // A failure of the job, in the order they came (one per attempt).
  void Add(const WorkerFailure& failure);
  // A failure that is not a worker's (a node lost): attempts that differ.
  void AddOther() {
    same_ = false;
    ++attempts_;
  }
  // Two or more attempts, each failing with the same deterministic signature.
  bool AllSame() const { return same_ && attempts_ >= 2; }
  const std::string& signature() const { return signature_; }
  int attempts() const { return attempts_; }

 private:
  int attempts_ = 0;
  bool same_ = true;
  std::string signature_;
};

}  // namespace mxrun
