#pragma once
// Turning the entrypoint into the command each worker runs:
//   x.py            -> python3 -u x.py ARGS      (interpreter from PYTHON_EXEC, else python3 on
//   PATH) -m module       -> python3 -u -m module ARGS
//   --no_python p   -> p ARGS                    (p looked up on PATH)
//   train           -> the bundled trainer installed beside mxrun
// Everything is checked before any worker starts, so a typo is a usage error (exit 2), not a
// restarted group of failing workers.

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/env_contract.h"
#include "launcher/launch_flags/launch_options.h"

namespace mxrun {

struct WorkerCommand {
  std::string executable;         // resolved path for execve
  std::vector<std::string> argv;  // argv[0] included, "${local_rank}" still unsubstituted
  std::string display_name;       // for messages: the entrypoint as the user wrote it
};

// The folder of the running mxrun binary, where the bundled trainer and mxrun-multinode are
// installed ("." when /proc/self/exe cannot be read).
std::string SelfDir();

// `self_dir` is the folder of the mxrun binary (where the bundled trainer lives).
// Errors: InvalidArgument naming the missing or unusable file.
absl::StatusOr<WorkerCommand> BuildWorkerCommand(const LaunchOptions& options, const EnvMap& env,
                                                 const std::string& self_dir);

}  // namespace mxrun
