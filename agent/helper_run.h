#pragma once
// Running a helper program to its end under a deadline: `--health_check`'s command, the Slurm
// KillWait query, `--prestart`'s import check. One implementation on the spawn checklist
// (process_launcher.h: its own process group, signals reset, every other descriptor closed), so a
// helper that hangs is killed with everything it started, and one that leaves a child holding
// its output is still reaped within a bound.

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace mxrun {

struct HelperOptions {
  std::chrono::milliseconds timeout{10'000};
  std::vector<std::string> env;  // "KEY=VALUE"; empty: this process's own environment
  bool capture_stderr = true;    // false: its stderr goes to /dev/null
  size_t max_output = 64 * 1024; // the last this many bytes of its output are kept
};

struct HelperRun {
  bool timed_out = false;  // killed (its whole process group) at the deadline
  bool exited = false;     // it exited: exit_code holds the status
  int exit_code = -1;
  int term_signal = 0;     // the signal that ended it, when it did not exit
  std::string output;      // stdout (and stderr when captured), at most max_output bytes
  bool ok() const { return exited && exit_code == 0; }
  // "exited 3", "was killed by signal 9", "did not finish in 2.5 s"
  std::string Describe(std::chrono::milliseconds timeout) const;
};

// `executable` is a path (no PATH search); argv[0] included. Errors: what SpawnProcess returns
// when it cannot start, Internal when a pipe cannot be made.
absl::StatusOr<HelperRun> RunHelper(const std::string& executable,
                                    const std::vector<std::string>& argv,
                                    const HelperOptions& options);

}  // namespace mxrun
