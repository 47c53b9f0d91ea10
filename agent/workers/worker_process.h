#pragma once
// One process of a worker group: a worker that holds a rank, or a warm standby that holds none
// (local_rank -1) until it is given one. Its pipes, its control channel, what it last said and
// how it ended. The worker group spawns, watches and stops them (worker_group.h); the in-process
// restart keeps, reassigns and promotes them (in_process_restart.h).

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <string>

#include "agent/process/oom_kills.h"
#include "agent/workers/output_relay.h"
#include "agent/workers/worker_control.h"
#include "common/worker_failure.h"

namespace mxrun {

struct WorkerProcess {
  explicit WorkerProcess(size_t kept_lines) : last_lines(kept_lines) {}
  int local_rank = 0;  // -1: a standby, no rank yet
  int global_rank = 0;
  pid_t pid = -1;
  bool running = false;
  bool stopped_by_agent = false;
  bool exited_ok = false;
  int exit_code = -1;               // once ended: its exit code, or -1 when a signal ended it
  int term_signal = 0;              // once ended: the signal that ended it (0: it exited)
  bool killed_after_grace = false;  // SIGKILLed by the agent when its grace ran out
  // Stopped (SIGSTOP, SIGTSTP, a debugger) when the agent last looked before keeping workers: it
  // could not take a new round, so it is not kept (WorkerGroup::LookBeforeKeeping).
  bool frozen = false;
  std::string dir;  // the attempt folder it was started in (kept workers keep theirs)
  std::string error_file;
  std::string heartbeat_file;
  std::string nccl_trace_file;
  std::string flight_socket;      // MXRUN_FLIGHT_SOCKET (empty: none)
  std::string nccl_trace_prefix;  // the TORCH_NCCL_DEBUG_INFO_TEMP_FILE mxrun sets (empty: none)
  std::chrono::system_clock::time_point started_at;
  OomKillCounts oom_kills_at_start;  // to tell an OOM kill from another SIGKILL (oom_kills.h)
  WorkerHang hang;
  LastLines last_lines;
  std::unique_ptr<OutputRelay> out;
  std::unique_ptr<OutputRelay> err;
  std::unique_ptr<WorkerControl> control;
};

// Running, said (over its control channel) that it takes new rounds in-process, not hung (a hung
// worker is what failed) and not stopped (it would hold the next round until judged hung in turn).
inline bool Keepable(const WorkerProcess& w) {
  return w.running && w.control && w.control->in_process_restart() && !w.hang.hung() && !w.frozen;
}

}  // namespace mxrun
