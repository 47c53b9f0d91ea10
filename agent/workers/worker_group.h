#pragma once
// The workers of one node for one attempt: starting them with the environment contract, relaying
// their output, recording how each one ended, and stopping them (signal to each process group, a
// grace period per worker, SIGKILL, reap, then kill any descendants left behind).
//
// States: running -> (all exited 0) succeeded | (first non-zero exit, death by signal, or a hang)
// failed. The first failure is the one the agent saw first; workers stopped by the agent afterwards
// are not failures. A hung worker (MarkHung) fails the group while it still runs. Single-threaded,
// driven by the agent's EventLoop.
//
// In-process restart: every worker gets a control channel (common/control_protocol.h). After a
// failure, the workers that declared they can take a new round are kept (StopUnkeepable stops the
// others) and Reassign tells them the next round and starts processes only for the ranks nobody
// holds; the group is then running again, with a fresh failure state.
//
// Warm standbys (spec.standby_workers): spare processes of the same program (or of
// spec.standby_argv: --prestart's interpreters), started once the group runs, with
// MXRUN_STANDBY=1 and no rank. Each prepares itself and says hello when ready;
// Reassign gives a rank nobody holds to a ready standby before it would start a new process, and
// StartStandbys starts another behind it. Standbys are not members: their exits fail nothing,
// and the hang monitor does not see them.

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "agent/process/death_guardian.h"
#include "agent/process/event_loop.h"
#include "agent/workers/log_spec.h"
#include "agent/node/numa_binding.h"
#include "agent/workers/output_relay.h"
#include "agent/workers/standby_start.h"
#include "agent/workers/worker_control.h"
#include "common/env_contract.h"
#include "common/worker_failure.h"
#include "rendezvous/rendezvous.h"

namespace mxrun {

// How long a stop waits for workers to be reaped after SIGKILL. A process in uninterruptible sleep
// (D state) acts on SIGKILL only when it leaves D, which may be never: it is then reported by pid
// and left behind, and the stop goes on.
inline constexpr std::chrono::milliseconds kReapAfterKill{10'000};

// What to run and how; the same for every attempt.
struct WorkerSpec {
  std::string executable;              // resolved path for execve
  std::vector<std::string> argv;       // argv[0] included; "${local_rank}" is substituted
  EnvMap base_env;                     // the agent's environment
  std::string role = "default";
  std::string host_name;
  LogSpec logs;
  std::string attempts_dir;            // per-attempt folders (error files, logs) are made here
  bool attempts_dir_kept = false;      // false: a scratch folder removed at exit (paths not shown)
  size_t last_lines = 10;              // kept per worker for the failure summary
  bool json_logs = false;              // --log_format=json: console lines as JSON objects, and the
                                       // agent's failure summary as one log record
  bool heartbeat_files = false;        // give each worker MXRUN_HEARTBEAT_FILE (--hang_timeout)
  std::string timer_file;              // the FileTimer pipe for TORCHELASTIC_TIMER_FILE (or empty)
  int standby_workers = 0;             // spare processes kept loaded for in-process restarts
  std::vector<std::string> standby_argv;  // how a standby starts (empty: as a worker, argv)
  // --prestart: the standbys are pre-started interpreters for an ordinary script, one per local
  // rank; they start kPrestartDelay after the round (its workers say neither "joined" nor
  // progress), and a group with ready ones is kept on a failure so that Reassign hands them the
  // ranks (python/mxrun/_prestart.py).
  bool prestart = false;
  bool virtual_local_rank = false;     // LOCAL_RANK=0 and one device in CUDA_VISIBLE_DEVICES
  std::string line_prefix_template;    // console line prefix (line_prefix.h); empty: mxrun's
  std::vector<WorkerBinding> numa;     // --numa-binding, by local rank (empty: none); a standby
                                       // is unbound until it takes a rank, then re-pinned
  // Called on the loop with each progress report of a worker that holds a rank (standbys' are
  // dropped): its local and global rank, and the report (common/control_protocol.h).
  std::function<void(int local_rank, int global_rank, const WorkerControlMessage&)> on_progress;
};

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
    bool exited_ok = false;       // ended on its own with exit code 0
    bool stopped_by_agent = false;  // ended because the agent stopped it
    int exit_code = -1;             // once ended: its exit code (-1: a signal ended it)
    int term_signal = 0;            // once ended: the signal that ended it (0: none)
    bool killed_after_grace = false;  // SIGKILLed by the agent when the stop's grace ran out
    std::string heartbeat_file;   // MXRUN_HEARTBEAT_FILE (empty: none)
    std::string nccl_trace_file;  // where PyTorch's NCCL flight recorder would dump
    std::chrono::system_clock::time_point started_at;
  };
  std::vector<WorkerStatus> Workers() const;
  // How many workers have ended so far (cheap: lets a watcher skip Workers() while nothing ended).
  int ended() const { return ended_; }
  std::vector<std::string> LastLinesOf(int local_rank) const;
  // This attempt's folder, and whether it outlives the agent (--log_dir) or is scratch.
  std::string AttemptDir() const;
  bool attempt_dir_kept() const { return spec_.attempts_dir_kept; }
  // The running worker `local_rank` is hung: the group fails with it as the cause unless it has
  // already failed; Stop() then ends it like the others.
  void MarkHung(int local_rank, const WorkerHang& hang);
  // The watchdog sent the worker its FileTimer's signal: if the worker then ends badly, `hang` is
  // the cause its failure reports.
  void NoteHang(int local_rank, const WorkerHang& hang);

  // Sends `signo` to every running worker's process group, waits up to `grace` per worker while
  // still relaying output, SIGKILLs the rest, reaps them, kills leftover descendants and closes the
  // output streams. `reap` is called to reap children while waiting. Returns when all are gone, or
  // kReapAfterKill after the SIGKILL at the latest (a worker still there is logged by pid).
  // Calling `Escalate()` (from a signal callback) while this runs skips the rest of the grace.
  void Stop(int signo, std::chrono::milliseconds grace, const std::function<void()>& reap);
  void Escalate() { escalate_ = true; }
  // Sends `signo` to every running worker's process group (and its standbys'); returns how many
  // workers it reached. Nothing else changes: the workers decide what the signal means.
  int SignalRunning(int signo);

  // After every worker has exited on its own: kill leftover descendants, flush and close output.
  void Finish();

  // Reads what the workers' control channels hold now: a hello written just before another
  // worker's exit must count, whichever of the two the loop happened to see first.
  void ReadControlChannels();
  // Whether a running worker has declared (over its control channel) that it can be kept.
  bool HasKeepableWorkers() const;
  // Whether one of --prestart's interpreters is ready to take a rank. (Not a module standby: one
  // that loaded its checkpoint long ago must not stand in for a whole group that died, which
  // restarts from the newest checkpoint instead.)
  bool HasReadyPrestarts() const;
  // Stops, as Stop does, every running worker that cannot be kept, and kills what the ended
  // workers left behind; the kept workers and their children run on.
  void StopUnkeepable(int signo, std::chrono::milliseconds grace,
                      const std::function<void()>& reap);
  // The group, after its failure was reported, becomes `round`'s: each kept worker whose local
  // rank is still in the round is sent its place (one that cannot be told is killed and replaced),
  // kept workers beyond the round's local world size are stopped, and processes start for the
  // ranks nobody holds. `failure_time` (seconds since the Unix epoch) goes to every worker.
  // Returns one line for the log: which workers were kept and which were started.
  std::string Reassign(const RoundAssignment& round, double failure_time, int signo,
                       std::chrono::milliseconds grace, const std::function<void()>& reap);
  // Starts standbys until spec.standby_workers are there (running, ready or not) once they are
  // due (standby_start.h); call at every turn of the loop (cheap).
  void MaybeStartStandbys();

 private:
  struct Worker;
  // Running, said it takes new rounds in-process, and not hung (a hung worker is what failed).
  static bool Keepable(const Worker& worker);
  void SpawnWorker(Worker& worker, const RoundAssignment& round, double failure_time = 0);
  void PrepareFiles(Worker& worker);  // its attempt folder, error and heartbeat files
  EnvMap StandbyEnv(const RoundAssignment& round) const;
  RoundNotice NoticeFor(const Worker& worker, const RoundAssignment& round,
                        double failure_time) const;
  // Gives `local_rank` to a ready standby (adds its line to `started`); false when none could.
  bool PromoteStandby(int local_rank, const RoundAssignment& round, double failure_time,
                      std::vector<std::string>& started);
  void StartStandbys(const RoundAssignment& round);
  void StopStandbys();
  EnvMap WorkerEnv(const Worker& worker, const RoundAssignment& round, double failure_time) const;
  void StopWhere(const std::function<bool(const Worker&)>& which, int signo,
                 std::chrono::milliseconds grace, const std::function<void()>& reap);
  void CloseStreams(Worker& worker);
  void RecordExit(Worker& worker, int exit_code, int term_signal);
  WorkerFailure FailureOf(const Worker& worker, int exit_code, int term_signal) const;
  Worker* FindRunning(int local_rank);
  void CleanUp();
  // The attempt's filtered files (--duplicate-std*-filters), opened in its folder.
  void OpenDuplicates();
  void CloseDuplicates();

  const WorkerSpec& spec_;
  EventLoop& loop_;
  DeathGuardian& guardian_;
  std::vector<std::unique_ptr<Worker>> workers_;
  std::vector<std::unique_ptr<Worker>> standbys_;  // spares; local_rank -1 until promoted
  RoundAssignment round_;                          // the current round
  StandbyStart standby_start_;                     // when the standbys may start
  bool standbys_pending_ = false;                  // to be (re)filled once the round is joined
  bool stopping_standbys_ = false;
  std::optional<WorkerFailure> first_failure_;
  LineDuplicate duplicate_out_;  // attempt_<N>/filtered_stdout.log
  LineDuplicate duplicate_err_;  // attempt_<N>/filtered_stderr.log
  int node_rank_ = 0;
  int attempt_ = 0;
  int ended_ = 0;
  bool escalate_ = false;
  bool cleaned_up_ = false;
};

}  // namespace mxrun
