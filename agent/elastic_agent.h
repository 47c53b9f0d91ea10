#pragma once
// The agent's loop: join a round, start the workers, watch them, report how they ended, and obey
// the rendezvous (re-join, job succeeded, job failed). Everything arrives as an event on one loop:
// worker exits and output, signals, rendezvous events. Signals the agent receives are forwarded to
// the workers, which get their grace period; the agent then exits with 128 + the signal number.
//
// Phases: joining -> (round ready) running -> (workers ended, reported) awaiting -> joining | exit.
// A worker failure is reported before the rest of the group is stopped, so that other nodes can
// stop theirs at the same time. A hung worker (hang_monitor.h) is a worker failure like any other.
//
// Exit codes (docs/CONTRACT.md; the constants below): 0 every worker succeeded; 1 workers failed
// after the restart budget; 2 usage (a bad setting, refused before anything starts); 3 rendezvous
// failed; 93 every attempt failed the same deterministic way (--do_not_requeue_exit_code);
// 128+N stopped by signal N.

#include <chrono>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>

#include "agent/agent_observer.h"
#include "agent/agent_settings.h"
#include "agent/event_log.h"
#include "agent/hang/file_timer.h"
#include "agent/hang/hang_monitor.h"
#include "agent/node/gpu_reclaim.h"
#include "agent/node_health_gate.h"
#include "agent/own_stop_signal_wait.h"
#include "agent/process/death_guardian.h"
#include "agent/rank_progress_book.h"
#include "agent/workers/node_workers.h"
#include "common/service_notify.h"
#include "common/straggler_watch.h"
#include "rendezvous/rendezvous.h"
#include "spdlog/common.h"

namespace mxrun {

// mxrun's exit codes (docs/CONTRACT.md). 2 and kExitDoNotRequeue are the ones a requeue cannot
// fix; 1, 3 and 128+N (a signal) may go another way the next time.
inline constexpr int kExitSuccess = 0;
inline constexpr int kExitWorkersFailed = 1;
inline constexpr int kExitUsage = 2;
inline constexpr int kExitRendezvousFailed = 3;
inline constexpr int kExitDoNotRequeue = 93;  // the default of --do_not_requeue_exit_code

// What the agent runs with: its knobs as the flags set them (agent_settings.h, taken whole), and
// what the launcher works out for this node and this run.
struct AgentConfig {
  AgentSettings settings;
  WorkerSpec worker;
  std::string entrypoint_name;                // for the summary's headline
  ServiceNotifier notifier;                   // systemd notifications (disabled outside systemd)
  HangMonitorConfig hang;                     // hang detection (hang_monitor.h)
  std::unique_ptr<FileTimerPipe> timer_pipe;  // the FileTimer pipe, when that watchdog is on
  // No rendezvous wait is silent: after this long without a round, and every 30 s after, the
  // agent says what it waits for and where (`rendezvous_description`).
  std::string rendezvous_description;
  std::chrono::milliseconds waiting_notice_after{5000};
  EventLogConfig events;  // --event-log-handler (event_log.h)
  // Told what happens besides the agent's own observers (time accounting, event records,
  // systemd): the metrics. Not owned.
  std::vector<AgentObserver*> observers;
  // The GPUs of this node's local ranks, as CUDA_VISIBLE_DEVICES entries (empty: none): their
  // memory is reclaimed before a respawn (gpu_reclaim.h), their health checked.
  std::vector<std::string> gpu_entries;
};

// Handled signals that are passed on to every worker while the job goes on, instead of stopping
// it: Slurm's `--signal=USR1@60` warns of the time limit, and the workers checkpoint.
bool IsForwardOnlySignal(int signo);

class ElasticAgent {
 public:
  ElasticAgent(AgentConfig config, Rendezvous& rendezvous, DeathGuardian& guardian);

  // Runs the job to its end and returns the process exit code.
  int Run();

 private:
  enum class Phase { kJoining, kRunning, kAwaiting };

  void OnSignal(int signo);
  // Checks the node's health, then asks the rendezvous for a place and starts the clock of the
  // waiting notice; false when the node is unhealthy (said, and told to the rendezvous): the
  // agent exits with health_.exit_code().
  bool Join();
  void ReapChildren();
  // Stops the group (if any) and returns how each of its workers ended.
  std::vector<WorkerGroup::WorkerStatus> StopGroup(int signo);
  // After a failure or before a re-formation: keeps the workers that can take the next round
  // in-process (worker_group.h), or stops the whole group when none can.
  void KeepOrStopGroup();
  // Handles one rendezvous event; returns the exit code when the job is over.
  std::optional<int> OnRendezvousEvent(const RendezvousEvent& event);
  // Checks the running group; reports to the rendezvous when its workers have ended.
  void CheckGroup();
  // A worker's death by a stop signal the agent did not send, while the agent may yet get its own
  // (AgentSettings::await_own_stop_signal): true until that wait is over, and a timer checks again.
  bool AwaitingOwnStopSignal(const WorkerFailure& failure);
  // The same wait for a rendezvous that failed (its master's host cancelled first, under a
  // manager): runs the loop until the agent's own stop signal comes or the wait is over.
  void AwaitOwnStopSignalAfter(const std::string& what);
  int JobFailed(const RendezvousEvent& event);
  int Cancelled(const std::vector<WorkerGroup::WorkerStatus>& ended);
  // The end-of-job summary's word on the nodes the master left out (repeat offenders).
  void NoteExcluded(const RendezvousEvent& event);
  // Before a new group starts where the last one ran: waits (bounded) until the GPUs its workers
  // used have let their memory go (gpu_reclaim.h), and says what it waited for.
  void ReclaimGpuMemory();
  // The agent's last event record (event_log.h), then its exit code.
  int Exit(int exit_code, std::optional<std::string> why_failed = std::nullopt);

  AgentConfig config_;
  const AgentSettings& settings_ = config_.settings;
  Rendezvous& rendezvous_;
  DeathGuardian& guardian_;
  // Before each join and on --health_check_interval while workers run (node_health_gate.h).
  NodeHealthGate health_;
  std::unique_ptr<EventLoop> loop_;
  std::unique_ptr<HangMonitor> hangs_;
  std::unique_ptr<NodeWorkers> workers_;  // the current group and its standbys, while there is one
  std::deque<RendezvousEvent> pending_;   // rendezvous events not yet handled
  Phase phase_ = Phase::kJoining;
  int stop_signal_ = 0;  // first handled signal received
  OwnStopSignalWait own_signal_{config_.settings.await_own_stop_signal};  // for the current group
  double failure_time_ = 0;     // when the failure (or re-formation) behind the next
                                // round was seen, seconds since the Unix epoch; 0: none
  std::string waiting_reason_;  // the rendezvous' last word on what it waits for
  bool excluded_ = false;       // the master leaves this node out of rounds for now
  // How the last group's workers ended when it was stopped to re-form, until the next round
  // starts: a stop signal in between reports them (scancel reaches the nodes one after another,
  // so a peer's leaving often stops this node's workers first), and the next round's GPU memory
  // reclaim waits for their pids.
  std::vector<WorkerGroup::WorkerStatus> stopped_for_next_round_;
  std::unique_ptr<GpuMemoryReclaimer> reclaimer_;  // made at the first respawn
  // Everything that reports what happens (agent_observer.h): its own, then config_.observers.
  std::vector<std::unique_ptr<AgentObserver>> own_observers_;
  std::vector<AgentObserver*> observers_;
  RoundAssignment round_;      // the running round (for the ranks' local ranks)
  RankProgressBook progress_;  // this round's reports, passed on to the rendezvous
  void OnProgress(int local_rank, int global_rank, WorkerControlMessage report);
  // Tells every observer, in order.
  void Tell(const std::function<void(AgentObserver&)>& event);
  // A line for the log and the observers' status (systemd's); `stopping`: on the way out.
  void Announce(spdlog::level::level_enum level, const std::string& text, bool stopping = false);
  // A rank of this node named a straggler or no longer (here or by the master): logged, told to
  // the observer, and with --straggler_restart the group is failed.
  void OnStraggler(const StragglerNews& news);
};

}  // namespace mxrun
