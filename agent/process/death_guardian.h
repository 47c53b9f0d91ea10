#pragma once
// Makes sure no worker process group outlives the agent, even when the agent is killed with
// SIGKILL and can clean up nothing itself.
//
// Workers get a parent-death signal, but their own children (data-loader processes and the like) do
// not. So the agent forks a tiny guardian process at start-up, before any thread exists, and tells
// it over a pipe which process groups are alive. When the pipe closes (the agent exited or died),
// the guardian SIGKILLs every group it still knows of, removes the agent's scratch folder and
// exits.

#include <sys/types.h>

#include <string>

#include "absl/status/statusor.h"

namespace mxrun {

class DeathGuardian {
 public:
  // Forks the guardian. `scratch_dir` (may be empty) is removed when the agent is gone.
  // Call before any thread is started.
  static absl::StatusOr<DeathGuardian> Start(const std::string& scratch_dir);

  DeathGuardian(DeathGuardian&& other) noexcept;
  DeathGuardian& operator=(DeathGuardian&& other) noexcept;
  ~DeathGuardian();

  void Track(pid_t pgid);   // a worker's process group now exists
  void Forget(pid_t pgid);  // that group is gone (so a reused pgid is never killed)
  pid_t pid() const { return pid_; }

 private:
  DeathGuardian(pid_t pid, int write_fd) : pid_(pid), write_fd_(write_fd) {}
  void Send(int value);

  pid_t pid_ = -1;
  int write_fd_ = -1;
};

}  // namespace mxrun
