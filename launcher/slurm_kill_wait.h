#pragma once
// Cancelled under Slurm (scancel, the time limit, preemption), a job step's processes get SIGTERM
// and, KillWait seconds later (slurm.conf, 30 by default, often less), SIGKILL. mxrun's own grace
// before it SIGKILLs its workers (--term_timeout, 30 s) must end inside KillWait, or Slurm kills
// workers mid-checkpoint and mxrun before it can report. So under Slurm, unless a grace was given,
// mxrun asks `scontrol show config` for KillWait at start and shortens its grace to fit.

#include <chrono>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/env_contract.h"

namespace mxrun {

// KillWait from `scontrol show config`'s output ("KillWait                = 30 sec");
// nullopt when no such line holds a number of seconds.
std::optional<std::chrono::milliseconds> ParseKillWait(absl::string_view scontrol_config);

// The grace that ends inside `kill_wait`, leaving mxrun time to SIGKILL, reap and report:
// kill_wait minus min(3 s, kill_wait / 3).
std::chrono::milliseconds GraceWithinKillWait(std::chrono::milliseconds kill_wait);

// Runs `scontrol show config` (found on env's PATH) for at most `timeout` and parses KillWait.
// Errors: NotFound (no scontrol), DeadlineExceeded, Unavailable (it failed or printed no
// KillWait), each saying what happened.
absl::StatusOr<std::chrono::milliseconds> QuerySlurmKillWait(const EnvMap& env,
                                                             std::chrono::milliseconds timeout);

}  // namespace mxrun
