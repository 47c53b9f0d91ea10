#pragma once
// What is known about one failed worker: enough to print the summary on any node and to send it to
// the master in a later, multi-node round.

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

namespace mxrun {

// Why mxrun judged a worker hung (agent/hang/hang_watch.h), and what it found out before stopping
// it.
struct WorkerHang {
  std::string rule;                      // "FileTimer", "heartbeat", "exit barrier"; empty: none
  std::string detail;                    // what happened, with the numbers
  std::string diagnostics_dir;           // where the full diagnostics were written (on `host`)
  std::vector<std::string> diagnostics;  // their short form: state, waits, top of the stack

  bool hung() const { return !rule.empty(); }
};

// WorkerHang::rule of a rank stopped for being a straggler (--straggler_restart): not hung, but
// the group is stopped and restarted through the same path.
inline constexpr char kStragglerRule[] = "straggler";

struct WorkerFailure {
  std::chrono::system_clock::time_point time;  // when the agent saw it exit
  std::string host;
  int node_rank = 0;
  int global_rank = 0;
  int local_rank = 0;
  pid_t pid = 0;
  int attempt = 0;                  // TORCHELASTIC_RESTART_COUNT of the group it belonged to
  int exit_code = 0;                // meaningful when term_signal == 0
  int term_signal = 0;              // > 0: killed by this signal
  std::string error_file;           // the worker's TORCHELASTIC_ERROR_FILE when it is kept on disk
  std::string error_file_contents;  // what the worker wrote there (empty: nothing)
  std::string message;              // from the error file, when there is one
  std::string traceback;            // from the error file (py_callstack), when there is one
  std::vector<std::string> last_lines;  // the worker's last output lines, as printed
  WorkerHang hang;  // set when the failure is a hang (then the exit may be 0: still running)
  // Set when the failure was a collective's (agent/hang/collective_failure.h): what told it, and
  // every live rank's flight recorder taken before anything stopped, its folder (on `host`) and
  // the verdict's lines.
  std::string collective_sign;
  std::string flight_dir;
  std::vector<std::string> flight;
  // Set when a SIGKILL the agent did not send came with a rise in the kernel's OOM kill count
  // (agent/process/oom_kills.h): the words that say so.
  std::string oom_kill;
};

// How a worker ended, in words: "exit code 3", "Signal 9 (SIGKILL)" (", killed by the kernel's
// OOM killer (...)" when it was), or for a hang "hung
// (heartbeat): no heartbeat for 10.2 s (--hang_timeout=10.0 s)" followed, when the worker then died
// of it, by ", then Signal 9 (SIGKILL)".
std::string DescribeExit(const WorkerFailure& failure);

// What the failure counts as in the metrics and `mxrun status`: exit, signal, hang or straggler.
std::string FailureCause(const WorkerFailure& failure);

}  // namespace mxrun
