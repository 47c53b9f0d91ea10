#pragma once
// A worker's stdout and stderr: a pipe each, whose read end becomes an OutputRelay routed by
// --local_ranks_filter, --tee and --redirects (log_spec.h: the console, the rank's stdout.log and
// stderr.log, the attempt's filtered copies, the console collapse), watched on the agent's loop;
// and a warm standby's relays re-targeted when it takes a rank. The worker group calls these
// around each spawn (worker_group.h).

#include "absl/status/statusor.h"
#include "agent/process/event_loop.h"
#include "agent/workers/attempt_files.h"
#include "agent/workers/console_collapser.h"
#include "agent/workers/worker_process.h"
#include "agent/workers/worker_spec.h"

namespace mxrun {

// The write ends of a worker's output pipes, for the child; the caller closes them once the
// child holds them (after the spawn, whether it succeeded or not).
struct ChildOutputFds {
  int stdout_fd = -1;
  int stderr_fd = -1;
};

// Makes both pipes and sets `worker.out` and `worker.err` to their relays. A standby
// (local_rank < 0) writes to the console only ("[nN standby]") until it has a rank. On failure
// nothing stays open and the status says why.
absl::StatusOr<ChildOutputFds> OpenWorkerOutput(WorkerProcess& worker, const WorkerSpec& spec,
                                                AttemptFiles& files, ConsoleCollapser* collapse,
                                                int node_rank);
// Watches both relays on `loop`, each until its pipe ends.
void WatchWorkerOutput(WorkerProcess& worker, EventLoop& loop);
// A standby that took its rank (worker.local_rank and global_rank set, its folder prepared): its
// lines now name the rank and go to the rank's log files.
void RetargetWorkerOutput(WorkerProcess& worker, const WorkerSpec& spec, int node_rank);
// Reads what is left in both pipes and closes them (no longer watched).
void CloseWorkerOutput(WorkerProcess& worker, EventLoop& loop);

}  // namespace mxrun
