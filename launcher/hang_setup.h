#pragma once
// Hang detection as the flags ask (agent/hang/hang_monitor.h): the heartbeat files, torchrun's
// FileTimer watchdog (its pipe in the scratch folder unless TORCHELASTIC_TIMER_FILE names one), the
// watch on workers in uninterruptible sleep, the diagnostics' PATH and stack dumper, and PyTorch's
// flight recorder for every rank (flight_recorder_setup.h); what is on is said in one line.

#include <string>

#include "absl/status/status.h"
#include "agent/elastic_agent.h"
#include "common/env_contract.h"
#include "launcher/entrypoint.h"
#include "launcher/launch_flags/launch_options.h"

namespace mxrun {

// Fills `config.hang`, `config.timer_pipe` and the hang parts of `config.worker`. An error
// (InvalidArgument: the FileTimer pipe cannot be made) is a usage error.
absl::Status SetUpHangDetection(const LaunchOptions& options, const WorkerCommand& command,
                                const EnvMap& env, const std::string& scratch_dir, int nproc,
                                const std::string& run_id, AgentConfig& config);

}  // namespace mxrun
