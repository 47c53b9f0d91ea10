#pragma once
// Running mxrun (or anything) from a test: a child process with its stdout and stderr captured,
// every wait bounded by a deadline, and a kill by pid (of that child alone) when a deadline passes.

#include <sys/types.h>

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "tests/temp_dir.h"

namespace mxrun::testing {

struct ProcessResult {
  int exit_code = -1;  // -1 when killed by a signal or timed out
  int term_signal = 0;
  bool timed_out = false;
  std::string out;
  std::string err;
  std::chrono::milliseconds elapsed{0};
};

class Subprocess {
 public:
  // Starts argv[0] (looked up on PATH) with the test's environment plus `env` (an empty value
  // removes the variable).
  Subprocess(const std::vector<std::string>& argv,
             const std::map<std::string, std::string>& env = {});
  ~Subprocess();  // kills the child if it still runs

  pid_t pid() const { return pid_; }
  // Reads output until stdout contains `count` lines containing `needle`, or the deadline.
  bool WaitForStdout(const std::string& needle, int count, std::chrono::milliseconds timeout);
  // The same for stderr (where mxrun logs).
  bool WaitForStderr(const std::string& needle, int count, std::chrono::milliseconds timeout);
  // Reads output until exit or deadline; kills the child (SIGKILL, by pid) at the deadline.
  ProcessResult Wait(std::chrono::milliseconds timeout);
  const std::string& out() const { return out_; }
  const std::string& err() const { return err_; }

 private:
  bool Pump(std::chrono::steady_clock::time_point deadline);  // false at deadline or EOF of both
  bool WaitFor(const std::string& stream, const std::string& needle, int count,
               std::chrono::milliseconds timeout);

  pid_t pid_ = -1;
  int out_fd_ = -1;
  int err_fd_ = -1;
  std::string out_;
  std::string err_;
  std::chrono::steady_clock::time_point started_;
  bool reaped_ = false;
};

// The exit code and both outputs, for a failed assertion's message.
std::string Describe(const ProcessResult& result);

ProcessResult Run(const std::vector<std::string>& argv,
                  const std::map<std::string, std::string>& env = {},
                  std::chrono::milliseconds timeout = std::chrono::seconds(60));

// Waits (bounded) until process `pid` — not necessarily our child — has exited. Event-based
// (pidfd), no polling. True when it is gone (or never existed).
bool WaitForExit(pid_t pid, std::chrono::milliseconds timeout);
bool IsAlive(pid_t pid);
// Whether /proc/<pid>/stat shows the process stopped (state T), polled for up to 5 s: SIGSTOP
// takes effect when the kernel next schedules the process.
bool BecomesStopped(pid_t pid);

#if defined(MXRUN_BIN) && defined(TEST_CHILD_BIN)
// `mxrun FLAGS --no_python test_child CHILD_ARGS`: the command most integration tests run
// (binaries from the MXRUN_BIN and TEST_CHILD_BIN compile definitions; test binaries without
// them, such as the GPU tests, go without this helper).
std::vector<std::string> MxrunWithChild(const std::vector<std::string>& flags,
                                        const std::vector<std::string>& child_args);
#endif

std::string ReadFile(const std::string& path);
// A file of KEY=VALUE lines (test_child --env-out writes one per worker).
std::map<std::string, std::string> ReadEnvFile(const std::string& path);
// Every integer that follows `key=` in `text` ("pid" finds 12 in "pid=12"; a leading space in the
// key keeps "grandchild" from matching "child").
std::vector<int> IntsAfter(const std::string& text, const std::string& key);
int CountOccurrences(const std::string& text, const std::string& needle);

}  // namespace mxrun::testing
