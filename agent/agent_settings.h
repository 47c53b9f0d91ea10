#pragma once
// The agent's own knobs as one value: filled by mxrun's flag groups (launcher/launch_flags: the
// stop, failure, straggler, health and GPU-reclaim groups) into LaunchOptions::agent and taken
// whole by the agent (AgentConfig::settings), so that main copies none of them. A new agent knob
// is a field here, a line in its flag group and its consumer.

#include <chrono>
#include <set>
#include <string>

#include "agent/node/gpu_reclaim.h"
#include "agent/node/health_check.h"
#include "common/straggler_watch.h"

namespace mxrun {

struct AgentSettings {
  // Stopping (stop_flags.cc). The handled signals are forwarded to the workers, then the agent
  // exits (SIGUSR1 and SIGUSR2: forwarded only, IsForwardOnlySignal).
  std::set<int> handled_signals;                   // --signals_to_handle
  std::chrono::milliseconds term_timeout{30'000};  // --term_timeout: the workers' grace
  // Under a manager that stops the whole process tree (Slurm's scancel, systemd's stop: both
  // signal every process, one after another), a worker dead of SIGTERM or SIGINT that the agent
  // did not send waits this long for the agent's own stop signal: if it comes, the job was
  // cancelled (cancel_summary.h), not failed. 0: judged at once (a worker killed alone).
  std::chrono::milliseconds await_own_stop_signal{0};

  // Failures (failure_flags.cc). --do_not_requeue_exit_code: the exit code when every attempt
  // failed the same deterministic way (common/repeated_failure.h), and an unhealthy node's; 0:
  // exit 1 as for any failure (kExitDoNotRequeue is the default).
  int do_not_requeue_exit_code = 93;
  std::string agent_error_file;  // TORCHELASTIC_ERROR_FILE: mxrun's own (may be empty)

  StragglerRule stragglers;        // straggler_flags.cc: --straggler_factor, --straggler_steps
  bool straggler_restart = false;  // --straggler_restart: a straggler fails the group
  // health_flags.cc: before each join, and on a period (health_check.h). The GPUs
  // (gpu_entries) are the launcher's to add: they are this node's, not a flag's.
  HealthCheckConfig health;
  GpuReclaimConfig gpu_reclaim;  // gpu_reclaim_flags.cc: before a respawn (gpu_reclaim.h)
};

}  // namespace mxrun
