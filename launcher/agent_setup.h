#pragma once
// The agent's configuration as the flags and the environment give it, composed in one place: its
// settings whole (LaunchOptions::agent, the grace fitted to Slurm's KillWait), the event records'
// labels, the workers' spec (command, environment, logs, virtual local rank) and the GPUs they
// drive. What needs the node prepared first is added by its own setup file after this: the scratch
// folder and binding (node_setup.h), --prestart (prestart.h), hang detection (hang_setup.h), the
// rendezvous (rendezvous_setup.h) and the metrics (metrics_setup.h).

#include <string>

#include "absl/status/statusor.h"
#include "agent/elastic_agent.h"
#include "common/env_contract.h"
#include "launcher/entrypoint.h"
#include "launcher/launch_flags/launch_options.h"

namespace mxrun {

// Errors (InvalidArgument, a usage error): --virtual_local_rank with a CUDA_VISIBLE_DEVICES that
// lists fewer devices than workers.
absl::StatusOr<AgentConfig> ComposeAgentConfig(const LaunchOptions& options, const EnvMap& env,
                                               const WorkerCommand& command, int nproc,
                                               const std::string& run_id);

}  // namespace mxrun
