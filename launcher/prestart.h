#pragma once
// --prestart: pre-started Python interpreters for an ordinary script (python/mxrun/_prestart.py).
// The agent keeps one standby per local rank that has imported torch; when the group restarts, the
// script runs in them (agent/workers/worker_group.h, "Warm standbys"). This sets the worker spec up
// for it and checks at launch that the workers' Python can import the bootstrap, so that a missing
// mxrun module is a usage error and not a standby that dies with every round.

#include "absl/status/status.h"
#include "agent/workers/worker_group.h"
#include "launcher/entrypoint.h"

namespace mxrun {

// `command` is the workers' (python3 -u SCRIPT|-m MODULE ARGS); `local_world_size` the standbys
// to keep. InvalidArgument naming the Python and what to install when the import fails.
absl::Status ConfigurePrestart(const WorkerCommand& command, int local_world_size,
                               WorkerSpec& worker);

}  // namespace mxrun
