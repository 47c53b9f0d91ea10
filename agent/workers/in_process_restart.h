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
// spec.standby_argv: --prestart's interpreters), started once the group runs (standby_start.h),
// with MXRUN_STANDBY=1 and no rank. Each prepares itself and says hello when ready; Reassign gives
// a rank nobody holds to a ready standby before it would start a new process, and another starts
// behind it. Standbys are not members: their exits fail nothing, and the hang monitor does not
// see them.

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "agent/process/death_guardian.h"
#include "agent/process/event_loop.h"
#include "agent/workers/standby_start.h"
#include "agent/workers/worker_group.h"

namespace mxrun {

class InProcessRestart {
 public:
  InProcessRestart(WorkerGroup& group, EventLoop& loop, DeathGuardian& guardian);
  // Releases the standbys (the group's stop or clean-up killed them with its sweep).
  ~InProcessRestart();
  InProcessRestart(const InProcessRestart&) = delete;
  InProcessRestart& operator=(const InProcessRestart&) = delete;

  // The group's round began (its start): standbys are started once they are due.
  void RoundBegan(const RoundAssignment& round);
  // Starts standbys until spec.standby_workers are there (running, ready or not) once they are
  // due; call at every turn of the loop (cheap).
  void MaybeStartStandbys();
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
  // Gives `local_rank` to a ready standby (adds its line to `started`); false when none could.
  bool PromoteStandby(int local_rank, const RoundAssignment& round, double failure_time,
                      std::vector<std::string>& started);
  void StartStandbys(const RoundAssignment& round);

  WorkerGroup& group_;
  const WorkerSpec& spec_;
  DeathGuardian& guardian_;
  std::vector<std::unique_ptr<WorkerProcess>> standbys_;  // local_rank -1 until promoted
  StandbyStart standby_start_;                              // when the standbys may start
  bool pending_ = false;                                    // to be (re)filled once joined
  bool stopping_ = false;                                   // their ends are expected
  int replaced_this_round_ = 0;  // standbys that died and were replaced in this round
  RoundAssignment round_;
};

}  // namespace mxrun
