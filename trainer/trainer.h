#pragma once
// The training run: data, model, data-parallel loop, evaluation, metrics and checkpoints.

#include "common/worker_env.h"
#include "trainer/options.h"

namespace mxrun::trainer {

// Trains as `identity` describes (alone, or one rank of a job). Returns the process exit code;
// errors are thrown as exceptions (main turns them into the error file and exit code 1).
int RunTrainer(const TrainerOptions& options, const WorkerIdentity& identity);

}  // namespace mxrun::trainer
