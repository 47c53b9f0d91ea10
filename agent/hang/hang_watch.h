#pragma once
// Deciding that a worker hangs, as a pure object: the agent feeds it what it observes (workers
// starting and ending, heartbeats seen, FileTimer requests, peers that finished) with the time of
// each, and asks it at every turn of its loop which workers are hung. No I/O, no clock of its own;
// tests drive it with fake times.
//
// Three rules, each off when its setting is 0:
//  * FileTimer (torchelastic's watchdog protocol): a worker acquired a timer (scope id, expiration
//    time on the wall clock, as `time.time()` in the worker) and has not released it when it
//    expires. The verdict carries the pid that asked and the timer's signal, which the agent sends
//    as torchrun's FileTimerServer does. Among one pid's expired timers the earliest with a signal
//    > 0 is used; expired timers without a signal are dropped with no verdict, as in torchrun, and
//    every timer of a pid with expired ones is cleared.
//  * heartbeat: a worker that has beaten at least once and then stays silent for longer than the
//    heartbeat timeout. A worker that never beat is never judged by this rule (it may not know it).
//    Workers that went silent together are judged together: when one passes the timeout, those
//    silent for all but a tenth of it (at most 1 s) are judged with it, so that the agent can name
//    the cause among them (a stopped rank, rather than a peer waiting for it in a collective).
//  * first step: in a round after one in which this node's workers beat (an in-process round, any
//    restart), a worker that has not beaten within the round-join bound of its start is hung: a
//    survivor blocked in the new group's setup, a new rank that never gets to train. Before the
//    first beat of the job nobody is judged by it (a script may report nothing at all). A worker
//    kept from the last round has done its setup: --hang_timeout bounds it when on; a new process
//    imports and loads first, and gets the round-join timeout (600 s unless given).
//  * exit barrier: once a worker of the job exited 0 (on this node, or on another one as the
//    master reports), workers still running longer than the barrier timeout after it are hung.
// A worker judged hung by the heartbeat or the exit barrier gets no further verdict in its group
// (the group fails with it). A FileTimer verdict leaves the worker subject to every rule: its
// signal may reach only a child of the worker, or be one the worker handles.

#include <sys/types.h>

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace mxrun {

struct HangSettings {
  std::chrono::milliseconds heartbeat_timeout{0};           // --hang_timeout; 0: off
  std::chrono::milliseconds exit_barrier_timeout{300'000};  // --exit_barrier_timeout; 0: off
  // --round_join_timeout: the first-step rule's bound. nullopt: --hang_timeout when that is on,
  // else kDefaultRoundJoinTimeout; 0: off.
  std::optional<std::chrono::milliseconds> round_join_timeout;
  // The FileTimer rule is on when the agent serves the pipe (HangMonitor's `pipe`).
};

// A round's setup (imports, a new group, the state agreed) takes seconds; ten minutes is
// torchrun's own rendezvous join timeout.
inline constexpr std::chrono::milliseconds kDefaultRoundJoinTimeout{600'000};

// The first-step rule's bound in force (0: off) for a worker kept from the last round or a new
// process, and the flag that set it ("--hang_timeout=15.0 s").
std::chrono::milliseconds FirstStepBound(const HangSettings& settings, bool kept);
std::string FirstStepBoundSource(const HangSettings& settings, bool kept);

// One line of torchelastic's FileTimer protocol (file_timer.h reads them).
struct FileTimerRequest {
  pid_t pid = 0;
  std::string scope_id;
  double expiration_time = 0;  // seconds since the epoch; < 0: release
  int signal = 0;              // <= 0: expire without killing
};

// kUninterruptible is judged apart, by UninterruptibleWatch (uninterruptible_watch.h); its verdicts
// take the same way from there (hang_monitor.h).
enum class HangRule { kFileTimer, kHeartbeat, kFirstStep, kExitBarrier, kUninterruptible };
// "FileTimer", "heartbeat", "first step", "exit barrier", "uninterruptible sleep".
const char* HangRuleName(HangRule rule);
// A silent worker (heartbeat, first step): it may only be waiting for another rank.
bool IsSilence(HangRule rule);

struct HangVerdict {
  int local_rank = 0;
  HangRule rule = HangRule::kHeartbeat;
  std::string detail;  // what happened, with the numbers ("no heartbeat for 10.2 s ...")
  // kFileTimer: the process to signal, and with what.
  pid_t pid = 0;
  int signal = 0;
  std::string scope_id;
  // How long the worker had been silent when judged; nullopt: it never beat.
  std::optional<std::chrono::milliseconds> since_heartbeat;
};

class HangWatch {
 public:
  using Time = std::chrono::steady_clock::time_point;
  using WallTime = std::chrono::system_clock::time_point;

  // What a timer request did, for the agent's log.
  enum class TimerResult { kSet, kReleased, kReleaseUnknown, kTooMany, kWorkerNotRunning };

  // Bounds the bookkeeping of a worker that acquires ever new scopes and never releases them.
  static constexpr size_t kMaxTimersPerWorker = 1024;

  explicit HangWatch(HangSettings settings) : settings_(settings) {}
  const HangSettings& settings() const { return settings_; }

  // A new group: forgets the previous group's workers, timers, beats and barrier (not that
  // workers beat before: the first-step rule holds from then on).
  void Reset();
  // `kept`: the process ran in the last round too (it took this one in-process).
  void WorkerStarted(int local_rank, int global_rank, Time now, bool kept = false);
  void WorkerExited(int local_rank, bool succeeded, Time now);
  // Workers of another node all exited 0 (the master says so); `who` names them for the verdict.
  void PeersFinished(const std::string& who, Time now);
  // The worker's heartbeat was seen to change, the beat having happened at `when`. An `automatic`
  // beat (a step the mxrun module counted for a script that never reports itself) arms the
  // first-step rule of later rounds only when the user asked for hang detection (--hang_timeout
  // or --round_join_timeout): the default 600 s must not stop a restarted script whose set-up is
  // longer, for a report it never asked for.
  void HeartbeatSeen(int local_rank, Time when, bool automatic = false);
  // A verdict the agent did not act on (a heartbeat verdict held for a peer's word, and the
  // worker beat again meanwhile): the worker is watched again, so that a later silence in the same
  // round is judged too.
  void VerdictWithdrawn(int local_rank);
  // A FileTimer request from a process the agent attributed to `local_rank` (the worker itself or
  // one of its descendants).
  TimerResult OnTimerRequest(int local_rank, const FileTimerRequest& request, WallTime now);

  // The verdicts due at `now` (every worker at most once), in the order in which the workers
  // went wrong: the earliest expired timer, the longest silence, then local rank.
  std::vector<HangVerdict> Check(Time now, WallTime wall_now);
  // When Check may next have a verdict; nullopt: nothing is pending.
  std::optional<Time> NextDeadline(Time now, WallTime wall_now) const;

  std::optional<std::chrono::milliseconds> SinceHeartbeat(int local_rank, Time now) const;
  size_t timer_count() const { return timers_.size(); }
  // Whether any worker beat since this watch was made (across groups).
  bool beaten_before() const { return beaten_before_; }

 private:
  struct Worker {
    int global_rank = 0;
    bool running = false;
    bool judged = false;
    std::optional<Time> last_beat;
    Time started{};
    bool kept = false;
    std::optional<Time>
        first_step_due;  // the first-step rule's deadline (nullopt: not judged by it)
  };
  struct Timer {
    int local_rank = 0;
    double expiration_time = 0;
    int signal = 0;
    WallTime set_at;
  };

  Worker* Find(int local_rank);
  void StartBarrier(std::string cause, Time now);
  std::optional<Time> HeartbeatDeadline(const Worker& worker) const;
  std::optional<Time> FirstStepDeadline(const Worker& worker) const;

  HangSettings settings_;
  std::map<int, Worker> workers_;                          // by local rank
  std::map<std::pair<pid_t, std::string>, Timer> timers_;  // by (pid, scope id), as torchrun
  std::optional<Time> barrier_since_;
  std::string barrier_cause_;  // "rank 0 exited 0", "node 1's workers finished"
  bool beaten_before_ = false;
};

}  // namespace mxrun
