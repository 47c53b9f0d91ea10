#pragma once
// The in-process restart of a worker group, and its warm standbys. It calls down into the group's
// primitives (worker_group.h: stop some workers, begin a round, start a rank, spawn a standby,
// adopt one); the group knows nothing of it.
//
// After a failure, the workers that declared they can take a new round are kept (StopUnkeepable
// stops the others) and Reassign tells them the next round (a round notice: only what differs in
// their environment, rank_env.h) and starts processes only for the ranks nobody holds; the group
// is then running again, with a fresh failure state.
//
// Warm standbys (spec.standby_workers): spare processes of the same program (or of
// spec.standby_argv: --prestart's interpreters), started with the group's workers and, in later
// rounds, once the group runs (standby_start.h), with MXRUN_STANDBY=1 and no rank. Each prepares
// itself and says hello when ready; Reassign gives a rank nobody holds to a ready standby before
// it would start a new process, and another starts behind it. A standby still preparing when the
// failure comes is ahead of any process started now (same program, started earlier), so the rank
// waits for it, up to kStandbyAwait, rather than going to a cold process that would compete with
// it for the cores; one that ends or overruns gives the rank to a new process at once. Standbys
// are not members: their exits fail nothing, and the hang monitor does not see them.

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "agent/process/death_guardian.h"
#include "agent/process/event_loop.h"
#include "agent/process/scoped_timer.h"
#include "agent/workers/standby_start.h"
#include "agent/workers/worker_group.h"

namespace mxrun {

// How long a rank waits for a standby that was still preparing when the rank was lost; then the
// standby is killed and a new process takes the rank. A standby's preparation is an interpreter
// start and its imports, seconds; this bounds one that hangs in it.
inline constexpr std::chrono::seconds kStandbyAwait{60};

class InProcessRestart {
 public:
  InProcessRestart(WorkerGroup& group, EventLoop& loop, DeathGuardian& guardian);
  // Releases the standbys (the group's stop or clean-up killed them with its sweep).
  ~InProcessRestart();
  InProcessRestart(const InProcessRestart&) = delete;
  InProcessRestart& operator=(const InProcessRestart&) = delete;

  // The group started (all its workers new): standbys start with them.
  void RoundBegan(const RoundAssignment& round);
  // Gives a rank that waits for a preparing standby to it once it is ready (or to a new process
  // when it ends or overruns kStandbyAwait), then starts standbys until spec.standby_workers are
  // there (running, ready or not) once they are due; call at every turn of the loop (cheap).
  void MaybeStartStandbys();
  // Called with the local rank whenever a rank that waited for a standby gets its process.
  void OnLateStart(std::function<void(int local_rank)> sink) { late_start_ = std::move(sink); }
  // Whether one of --prestart's interpreters is ready to take a rank. (Not a module standby: one
  // that loaded its checkpoint long ago must not stand in for a whole group that died, which
  // restarts from the newest checkpoint instead.)
  bool HasReadyPrestarts() const;
  // Stops, as the group's Stop does, every running worker that cannot be kept, and kills what the
  // ended workers left behind; the kept workers and their children run on. Returns the workers
  // it stopped, as they were while running.
  std::vector<WorkerGroup::WorkerStatus> StopUnkeepable(int signo, std::chrono::milliseconds grace,
                                                        const std::function<void()>& reap);
  // The group, after its failure was reported, becomes `round`'s: each kept worker whose local
  // rank is still in the round is sent its place (one that cannot be told is killed and replaced),
  // kept workers beyond the round's local world size are stopped, and a ready standby or a new
  // process takes each rank nobody holds. `failure_time` (seconds since the Unix epoch) goes to
  // every worker. Returns one line for the log: which workers were kept and which were started.
  std::string Reassign(const RoundAssignment& round, double failure_time, int signo,
                       std::chrono::milliseconds grace, const std::function<void()>& reap);
  // A reaped child that was a standby; false when `pid` is none of them.
  bool OnChildExit(pid_t pid, int wait_status);
  // Passes `signo` on to the standbys (as the group's SignalRunning does to its workers).
  void SignalStandbys(int signo);
  // Before the group stops: a standby holds no work, so no grace (the group's sweep reaps them).
  void StopStandbys();

 private:
  void Begin(const RoundAssignment& round, bool group_start);
  // Gives `local_rank` to a ready standby (adds its line to `started`); false when none could.
  bool PromoteStandby(int local_rank, const RoundAssignment& round, double failure_time,
                      std::vector<std::string>& started);
  // Holds `local_rank` for a standby still preparing (adds its line to `started`); false when
  // there is none that no other rank waits for.
  bool AwaitStandby(int local_rank, std::vector<std::string>& started);
  // The awaited standbys that became ready, ended or overran: their ranks are handed on.
  void HandAwaitedRanks();
  void StartStandbys(const RoundAssignment& round);

  // A rank of this round that waits for a standby still preparing.
  struct Awaited {
    int local_rank = -1;
    pid_t standby = -1;
    EventLoop::Deadline deadline{};
  };

  WorkerGroup& group_;
  EventLoop& loop_;
  const WorkerSpec& spec_;
  DeathGuardian& guardian_;
  std::vector<std::unique_ptr<WorkerProcess>> standbys_;  // local_rank -1 until promoted
  StandbyStart standby_start_;                            // when the standbys may start
  bool pending_ = false;                                  // to be (re)filled once joined
  bool stopping_ = false;                                 // their ends are expected
  int replaced_this_round_ = 0;  // standbys that died and were replaced in this round
  RoundAssignment round_;
  double failure_time_ = 0;       // of the round's failure, for the awaited ranks' notices
  std::vector<Awaited> awaited_;  // emptied by the next round
  ScopedTimer await_timer_;       // wakes the loop at the first awaited deadline (only a wake-up)
  std::function<void(int local_rank)> late_start_;
};

}  // namespace mxrun
