#pragma once
// The workers of one node for one attempt: starting them with the environment contract, relaying
// their output (worker_output.h), recording how each one ended, and stopping them (signal to each
// process group, a grace period per worker, SIGKILL, reap, then kill any descendants left behind).
//
// States: running -> (all exited 0) succeeded | (first non-zero exit, death by signal, or a hang)
// failed. The first failure is the one the agent saw first; workers stopped by the agent afterwards
// are not failures. A hung worker (MarkHung) fails the group while it still runs. Single-threaded,
// driven by the agent's EventLoop.
//
// Every worker gets a control channel (common/control_protocol.h); its progress reports are kept
// for the agent to take at its next loop turn (TakeProgress). What an in-process restart does
// with the workers (keep, reassign, promote a warm standby) is in_process_restart.h, which calls
// the primitives below (stop some, begin a round, start a rank, spawn a standby, adopt one).

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "agent/process/death_guardian.h"
#include "agent/process/event_loop.h"
#include "agent/workers/attempt_files.h"
#include "agent/workers/console_collapser.h"
#include "agent/workers/output_relay.h"
#include "agent/workers/rank_env.h"
#include "agent/workers/worker_process.h"
#include "agent/workers/worker_spec.h"
#include "common/control_protocol.h"
#include "common/worker_failure.h"
#include "rendezvous/rendezvous.h"

namespace mxrun {

// How long a stop waits for workers to be reaped after SIGKILL. A process in uninterruptible sleep
// (D state) acts on SIGKILL only when it leaves D, which may be never: it is then reported by pid
// and left behind, and the stop goes on.
inline constexpr std::chrono::milliseconds kReapAfterKill{10'000};

class WorkerGroup {
 public:
  enum class State { kRunning, kSucceeded, kFailed };

  WorkerGroup(const WorkerSpec& spec, EventLoop& loop, DeathGuardian& guardian);
  ~WorkerGroup();

  // Spawns every worker of `round`. A worker that cannot be executed becomes the group's failure
  // (exit code 127 with the errno text as its message); no further workers are started then.
  // `failure_time` (seconds since the Unix epoch, 0: none) is when the failure or re-formation
  // behind this round was seen; the workers get it as MXRUN_FAILURE_TIME.
  void Start(const RoundAssignment& round, double failure_time = 0);

  // Called with every reaped child; returns false when `pid` is not one of this group's workers.
  bool OnChildExit(pid_t pid, int wait_status);

  State state() const;
  const std::optional<WorkerFailure>& first_failure() const { return first_failure_; }

  // What the hang monitor watches of each worker, and how it ended.
  struct WorkerStatus {
    int local_rank = 0;
    int global_rank = 0;
    pid_t pid = -1;
    bool running = false;
    bool exited_ok = false;           // ended on its own with exit code 0
    bool stopped_by_agent = false;    // ended because the agent stopped it
    int exit_code = -1;               // once ended: its exit code (-1: a signal ended it)
    int term_signal = 0;              // once ended: the signal that ended it (0: none)
    bool killed_after_grace = false;  // SIGKILLed by the agent when the stop's grace ran out
    std::string heartbeat_file;       // MXRUN_HEARTBEAT_FILE (empty: none)
    std::string nccl_trace_file;      // where PyTorch's NCCL flight recorder would dump
    std::string flight_socket;  // where the mxrun module serves its flight recorder (empty: none)
    std::chrono::system_clock::time_point started_at;
  };
  std::vector<WorkerStatus> Workers() const;
  // How many workers have ended so far (cheap: lets a watcher skip Workers() while nothing ended).
  int ended() const { return ended_; }
  std::vector<std::string> LastLinesOf(int local_rank) const;
  // This attempt's folder, and whether it outlives the agent (--log_dir) or is scratch.
  std::string AttemptDir() const;
  bool attempt_dir_kept() const { return spec_.attempts_dir_kept; }
  int world_size() const { return round_.world_size; }  // of the round the group runs
  int round_number() const { return round_.round; }
  // The running worker `local_rank` is hung: the group fails with it as the cause unless it has
  // already failed; Stop() then ends it like the others.
  void MarkHung(int local_rank, const WorkerHang& hang);
  // The watchdog sent the worker its FileTimer's signal: if the worker then ends badly, `hang` is
  // the cause its failure reports.
  void NoteHang(int local_rank, const WorkerHang& hang);

  // Sends `signo` to every running worker's process group, waits up to `grace` per worker while
  // still relaying output, SIGKILLs the rest, reaps them, kills leftover descendants (warm
  // standbys among them) and closes the output streams. `reap` is called to reap children while
  // waiting. Returns when all are gone, or kReapAfterKill after the SIGKILL at the latest (a worker
  // still there is logged by pid). Calling `Escalate()` (from a signal callback) while this runs
  // skips the rest of the grace.
  void Stop(int signo, std::chrono::milliseconds grace, const std::function<void()>& reap);
  void Escalate() { escalate_ = true; }
  // Sends `signo` to every running worker's process group; returns how many workers it reached.
  // Nothing else changes: the workers decide what the signal means.
  int SignalRunning(int signo);

  // After every worker has exited on its own: kill leftover descendants, flush and close output.
  void Finish();

  // What the agent must know before it keeps workers for an in-process round. What the control
  // channels hold now: a hello written just before another worker's exit must count, whichever
  // of the two the loop happened to see first. And which workers are stopped (/proc state T or
  // t): a worker SIGSTOPped beside the one that failed is not kept.
  void LookBeforeKeeping();
  // Whether a running worker has declared (over its control channel) that it can be kept.
  bool HasKeepableWorkers() const;

  // The progress reports of workers that hold a rank, since the last call, in order.
  struct ProgressReport {
    int local_rank = 0;
    int global_rank = 0;
    WorkerControlMessage message;
  };
  std::vector<ProgressReport> TakeProgress() { return std::exchange(progress_, {}); }

  // Primitives of the in-process restart (in_process_restart.h).
  const WorkerSpec& spec() const { return spec_; }
  // Stops, as Stop does, the running workers `which` selects (their whole grace at once).
  void StopWhere(const std::function<bool(const WorkerProcess&)>& which, int signo,
                 std::chrono::milliseconds grace, const std::function<void()>& reap);
  // The group becomes `round`'s: its bookkeeping (attempt, failure state) starts afresh.
  void BeginRound(const RoundAssignment& round);
  std::vector<WorkerProcess*> RunningWorkers();
  WorkerProcess* FindRunning(int local_rank);
  // Ended workers leave the group (forgotten by the guardian).
  void DropEnded();
  // Starts a process for `local_rank` of `round`; it is a member whether it started or failed
  // to (its failure is then the group's).
  WorkerProcess& StartRank(int local_rank, const RoundAssignment& round, double failure_time);
  // A warm standby: a process of the spec's standby program with no rank, not a member (nullptr
  // when it could not start: said why).
  std::unique_ptr<WorkerProcess> SpawnStandby(const RoundAssignment& round);
  // `worker` (a standby given `local_rank`) joins the group: its files, its lines' rank and log
  // files.
  void Adopt(std::unique_ptr<WorkerProcess> worker, int local_rank, const RoundAssignment& round);
  // A process that leaves for good (a standby that ended or is dropped): its output drained and
  // closed, the guardian told.
  void Release(WorkerProcess& process);
  // The rank's environment files, for its round notice.
  static RankFiles FilesOf(const WorkerProcess& worker);
  // Whether every worker runs and said it joined round `round` (standby_start.h).
  bool AllJoined(int round) const;
  // How many of the round's ranks wait for a process (a standby still preparing,
  // in_process_restart.h): while any does, the group is running, even when every worker it has
  // has ended. BeginRound sets it back to 0.
  void SetRanksAwaited(int count) { ranks_awaited_ = count; }

 private:
  void SpawnWorker(WorkerProcess& worker, const RoundAssignment& round, double failure_time = 0);
  void CloseStreams(WorkerProcess& worker);
  void ReadControlChannels();
  void NoteStoppedWorkers();
  void RecordExit(WorkerProcess& worker, int exit_code, int term_signal);
  WorkerFailure FailureOf(const WorkerProcess& worker, int exit_code, int term_signal) const;
  void CleanUp();
  void SortByRank();

  const WorkerSpec& spec_;
  EventLoop& loop_;
  DeathGuardian& guardian_;
  // Before workers_: their relays offer it lines until they close (console_collapser.h).
  std::unique_ptr<ConsoleCollapser> collapse_;  // nullptr: --log_collapse_window=0
  std::vector<std::unique_ptr<WorkerProcess>> workers_;
  RoundAssignment round_;  // the current round
  std::optional<WorkerFailure> first_failure_;
  std::vector<ProgressReport> progress_;  // not yet taken by the agent
  AttemptFiles files_;                    // attempt_<N>/ and its files
  int node_rank_ = 0;
  int attempt_ = 0;
  int ended_ = 0;
  int ranks_awaited_ = 0;
  bool escalate_ = false;
  bool cleaned_up_ = false;
};

}  // namespace mxrun
