#pragma once
// The agent's hang detection at its edges: it serves the FileTimer pipe, polls the workers'
// heartbeat files, feeds a HangWatch (the pure decisions) and acts on its verdicts. For each hung
// worker it first collects diagnostics (hang_diagnostics.h), then
//  * FileTimer: sends the timer's signal to the process that set it, as torchrun does; the worker's
//    death is then its failure, reported as a hang;
//  * heartbeat, exit barrier, uninterruptible sleep: marks the worker hung in its WorkerGroup,
//    which makes the group fail with it as the cause (the agent then reports it and stops the
//    group, on every node).
//
// Heartbeats: a worker touches (or writes to) MXRUN_HEARTBEAT_FILE. The files are polled with
// stat() a few times per timeout (at most every second) and when a deadline falls due, and a
// beat is placed at the file's modification time when that lies within the last poll interval:
// detection is as precise as the file's time stamp, yet a wall-clock step cannot fake a silence.
// Polling rather than inotify costs the same however often a worker beats. The files live in the
// attempt folders: with --log_dir on a network file system whose server hangs, stat() would stall
// the agent's loop, so keep --log_dir on a local disk when heartbeats are on.
// Uninterruptible sleep (TORCHELASTIC_UNINTERRUPTIBLE_STATE_TIMEOUT): each running worker's state
// is read from /proc/<pid>/stat every UninterruptiblePollPeriod and fed to an UninterruptibleWatch;
// the verdict's words get the worker's wait channel and kernel stack (when readable). No stack
// dumper is run on such a worker: a tracer cannot attach to a process until it leaves D. Stopping
// it is bounded like any stop (worker_group.h): a worker that does not die of SIGKILL is left
// behind.
// FileTimer requests are taken from the workers and their descendants only: a process that left
// its worker's tree (re-parented to init or to the agent) is not signalled, where torchrun would.
//
// Single-threaded, on the agent's EventLoop.

#include <chrono>
#include <memory>
#include <optional>
#include <set>
#include <string>

#include "agent/hang/file_timer.h"
#include "agent/hang/flight_records.h"
#include "agent/hang/hang_diagnostics.h"
#include "agent/hang/hang_watch.h"
#include "agent/hang/peer_culprit_wait.h"
#include "agent/hang/uninterruptible_watch.h"
#include "agent/process/event_loop.h"
#include "agent/process/scoped_timer.h"
#include "agent/process/turn_hooks.h"
#include "agent/workers/worker_group.h"

namespace mxrun {

struct HangMonitorConfig {
  HangSettings settings;
  std::string fallback_dir;  // hang folders are made here when the attempt folders are scratch
  std::string run_id;
  DiagnosticsOptions diagnostics;
  // TORCHELASTIC_UNINTERRUPTIBLE_STATE_TIMEOUT: a worker in D state this long is hung; 0: off.
  std::chrono::milliseconds uninterruptible_timeout{0};
  FlightRecorderConfig flight;  // every live rank's recorder, taken before anything stops
};

class HangMonitor {
 public:
  using Deadline = EventLoop::Deadline;

  // `pipe` is the FileTimer pipe when that rule is on (made early, so that a bad path is a usage
  // error before anything starts), else nullptr.
  HangMonitor(HangMonitorConfig config, EventLoop& loop, std::unique_ptr<FileTimerPipe> pipe);
  ~HangMonitor();
  HangMonitor(const HangMonitor&) = delete;
  HangMonitor& operator=(const HangMonitor&) = delete;

  // The group whose workers are watched from now on; nullptr while none runs (between rounds,
  // while a group is being stopped).
  void Watch(WorkerGroup* group);
  // A rank of the watched group's round got its process after the round began (it waited for a
  // standby that was still preparing, in_process_restart.h): it is watched from now on, as a
  // new process.
  void RankStarted(int local_rank);
  // Another node's workers all exited 0: the exit barrier starts for the workers here.
  void PeersFinished(const std::string& who);
  // A worker reported a step over its control channel: that is a heartbeat too (the protocol
  // says so), for workers in any language that never touch the heartbeat file.
  // `automatic`: counted by the mxrun module, not reported by the script
  // (HangWatch::HeartbeatSeen).
  void ProgressSeen(int local_rank, bool automatic = false);
  // Observes the workers (exits, heartbeats) and acts on the verdicts due now. It runs after every
  // turn of the agent's loop (the monitor adds it to the loop's turn hooks: worker exits are seen
  // there), and on a timer of its own, set for when it next has something to do (a deadline, a
  // poll), so the loop wakes for it by itself. It may take a few seconds when it collects
  // diagnostics.
  void Check();
  // Another node (`requester`) judged a hang in `round`: every running worker's flight recorder,
  // taken into a hang folder here, as the set to send it (flight_records.h).
  FlightRecordSet TakeFlightRecordsForPeer(int round, const std::string& requester);
  // `failure`, the group's first, is a collective's (collective_failure.h): every live rank's
  // flight recorder (and the failed rank's own, written as it died), on every node, with the
  // verdict, into the failure before it is reported. Nothing when it is not one.
  void TakeFlightRecordsOnCollectiveFailure(WorkerFailure& failure);

 private:
  // When Check next has something to do; nullopt: nothing.
  std::optional<Deadline> NextWake() const;
  void CheckNow();
  void Rearm();
  void OnTimerLine(const absl::StatusOr<FileTimerRequest>& request, std::string_view line);
  std::optional<int> OwnerOf(
      pid_t pid) const;  // the local rank whose worker is pid or its ancestor
  void PollHeartbeats(HangWatch::Time now);
  // Reads the running workers' states; the verdicts of those in D for the timeout.
  std::vector<HangVerdict> PollStates(HangWatch::Time now);
  // Verdicts held while another node may name the culprit (peer_culprit_wait.h), or to act on.
  std::vector<HangVerdict> SiftForPeerCulprit(std::vector<HangVerdict> verdicts,
                                              HangWatch::Time now);
  bool CannotRun(int local_rank) const;  // stopped or in D state
  // The global ranks of running workers that have not beaten in this group yet (still starting),
  // but for the local ranks in `late`.
  std::vector<int> StartingRanks(HangWatch::Time now, const std::set<int>& late) const;
  void Act(std::vector<HangVerdict> verdicts);
  std::string MakeDiagnosticsDir();
  KeepReading ServeTimerPipe();  // the FileTimer pipe, served while diagnostics run
  // Every local worker's target for the flight recorder, and this node's ranks.
  std::vector<FlightTarget> FlightTargets(std::set<int>* local_ranks) const;

  struct Stamp {  // what a heartbeat file looked like at the last poll
    bool exists = false;
    timespec mtime{};
    timespec ctime{};
    off_t size = 0;
    ino_t inode = 0;
  };

  HangMonitorConfig config_;
  EventLoop& loop_;
  HangWatch watch_;
  std::unique_ptr<FileTimerPipe> pipe_;
  WorkerGroup* group_ = nullptr;
  ScopedTimer timer_;                  // Check's next wake-up on the loop
  std::optional<Deadline> armed_for_;  // ... and when
  std::set<int> exits_seen_;           // local ranks whose end the watch was told of
  std::set<pid_t> watched_pids_;       // the last group's workers (kept ones take the next round)
  std::map<int, Stamp> stamps_;        // by local rank
  HangWatch::Time last_poll_{};
  UninterruptibleWatch dwell_;  // D state (off unless configured)
  PeerCulpritWait culprit_wait_;
  HangWatch::Time last_state_poll_{};
  int bad_lines_logged_ = 0;
  TurnHooks::Hook after_turn_;  // Check, after each turn of the agent's loop
};

}  // namespace mxrun
