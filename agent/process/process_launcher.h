#pragma once
// Starting one worker process, following a fixed checklist (docs/ARCHITECTURE.md, "Spawning
// checklist"):
//   everything allocated before fork; in the child only async-signal-safe calls: reset the signal
//   mask and handlers, own session and process group (setsid), parent-death signal then re-check
//   the parent, the agent named as the one that may ptrace it (Yama; for hang diagnostics' stack
//   dumps), dup2 the stdio fds (and the control channel to fd 3), close every other fd, execve; on
//   failure write errno to a close-on-exec pipe, _exit.
//   The CPU affinity and memory policy (--numa-binding) are set before the fds are arranged.
// The parent learns of an exec failure synchronously, with the errno text, instead of seeing a
// silent exit 127 later.

#include <sys/types.h>

#include <csignal>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace mxrun {

struct SpawnRequest {
  std::string executable;             // path passed to execve (already resolved, no PATH search)
  std::vector<std::string> argv;      // argv[0] included
  std::vector<std::string> env;       // "KEY=VALUE"
  int stdin_fd = -1;                  // -1: /dev/null
  int stdout_fd = -1;                 // -1: inherit the agent's
  int stderr_fd = -1;                 // -1: inherit the agent's
  int control_fd = -1;                // becomes fd 3 in the child (kControlFd); -1: none
  int parent_death_signal = SIGKILL;  // sent to the child when the agent dies
  // --numa-binding (numa_binding.h): the child's CPU affinity and preferred memory node, set
  // before execve so that its threads and children inherit them. A failure to set either does not
  // fail the start (the planner already checked them against the agent's own affinity).
  std::vector<int> cpus;  // empty: inherit the agent's
  int memory_node = -1;   // -1: the default policy
};

// Starts the process in a session and process group of its own (sid == pgid == pid). Returns its
// pid once execve has succeeded. Errors: FailedPrecondition with "cannot execute '<path>':
// <errno text>" when execve fails, Internal when fork or pipe fail.
absl::StatusOr<pid_t> SpawnProcess(const SpawnRequest& request);

// Resolves `name` like execvp would: a name with '/' is taken as is, otherwise each PATH entry is
// tried. Errors: NotFound (no such file), PermissionDenied (exists but not executable).
absl::StatusOr<std::string> ResolveExecutable(const std::string& name, const std::string& path_env);

}  // namespace mxrun
