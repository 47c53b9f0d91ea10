#pragma once
// Running a helper program to its end under a deadline: `--health_check`'s command, the Slurm
// KillWait query, `--prestart`'s import check, and (several at once) the stack dumps of hung
// workers (hang_diagnostics.h). One implementation on the spawn checklist
// (process_launcher.h: its own process group, signals reset, every other descriptor closed), so a
// helper that hangs is killed with everything it started, and one that leaves a child holding
// its output is still reaped within a bound.

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace mxrun {

struct HelperOptions {
  std::chrono::milliseconds timeout{10'000};
  std::vector<std::string> env;   // "KEY=VALUE"; empty: this process's own environment
  bool capture_stderr = true;     // false: its stderr goes to /dev/null
  size_t max_output = 64 * 1024;  // the last this many bytes of its output are kept
};

struct HelperRun {
  bool timed_out = false;  // killed (its whole process group) at the deadline
  bool exited = false;     // it exited: exit_code holds the status
  int exit_code = -1;
  int term_signal = 0;  // the signal that ended it, when it did not exit
  std::string output;   // stdout (and stderr when captured), at most max_output bytes
  bool ok() const { return exited && exit_code == 0; }
  // "exited 3", "was killed by signal 9", "did not finish in 2.5 s"
  std::string Describe(std::chrono::milliseconds timeout) const;
};

// `executable` is a path (no PATH search); argv[0] included. Errors: what SpawnProcess returns
// when it cannot start, Internal when a pipe cannot be made.
absl::StatusOr<HelperRun> RunHelper(const std::string& executable,
                                    const std::vector<std::string>& argv,
                                    const HelperOptions& options);

// Several helpers at once, each writing into a file of the caller's, waited for together.
struct StartedHelper {
  pid_t pid = -1;  // -1 once reaped
  int pidfd = -1;  // -1: the kernel gives none (kernels before 5.3, some seccomp profiles)
  bool timed_out = false;
  std::chrono::steady_clock::duration took{};
};
// Starts `executable` (a path; argv[0] included) with `env` ("KEY=VALUE"), its stdout and stderr
// into `output_fd` (the caller closes it).
absl::StatusOr<StartedHelper> StartHelper(const std::string& executable,
                                          std::vector<std::string> argv,
                                          std::vector<std::string> env, int output_fd);
// Waits for `helpers` until `deadline`, calling `on_readable` whenever `also_watch` is readable
// meanwhile (a descriptor to keep serving; -1: none); kills the process group of each one still
// running then and reaps it within a bound (one stuck in uninterruptible sleep is left to the
// caller's reaping). `took` counts from `started`. Without pidfds it polls every 20 ms.
void WaitForHelpers(const std::vector<StartedHelper*>& helpers,
                    std::chrono::steady_clock::time_point started,
                    std::chrono::steady_clock::time_point deadline, int also_watch,
                    const std::function<void()>& on_readable);

}  // namespace mxrun
