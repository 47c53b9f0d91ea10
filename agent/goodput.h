#pragma once
// How a node's wall time was spent, for the goodput line at the end of a job and the live
// metrics: the effective-training-time ratio that large-scale training reports publish
// (training time / wall time). Pure: fed events with their times, no clock of its own.
//
// Every moment from the agent's start belongs to exactly one bucket:
//   rendezvous  waiting for a round (the first, and every re-formation);
//   startup     from the first round's start to its first progress report (process start, data,
//               model, a checkpoint read);
//   restart     from a failure (this node's, or another's as the rendezvous tells) to the
//               re-formation, and from the new round's start to its first progress report;
//   training    from a round's first progress report to its end or failure, less lost work;
//   lost_work   steps done again after a restart: the steps between the one the new group
//               resumed from and the last one reported before the failure, at the mean step time.
// Without progress reports (a worker that sends none) a round's whole run counts as training and
// nothing can be known lost.

#include <chrono>
#include <optional>
#include <string>

namespace mxrun {

struct GoodputReport {
  double wall = 0;
  double rendezvous = 0;
  double startup = 0;
  double restart = 0;
  double training = 0;
  double lost_work = 0;
  long long steps_redone = 0;
  bool progress_reported = false;  // any worker reported steps
  // training / wall (0 when no time passed).
  double ratio() const { return wall > 0 ? training / wall : 0; }
};

class GoodputClock {
 public:
  using Time = std::chrono::steady_clock::time_point;

  explicit GoodputClock(Time start);
  void Joining(Time now);                   // the node asks the rendezvous for a round
  void RoundStarted(Time now);              // its workers run a round
  void Progress(Time now, long long step);  // a worker completed `step`
  void Failure(Time now);                   // the group failed or must re-form
  void Ended(Time now);  // the workers' group ended (success), or the job is over

  GoodputReport Report(Time now) const;
  bool ran() const { return started_once_; }  // some round started

 private:
  // kStarting and kRestarting: from a round's start to its first progress report; startup or
  // restart once reports are known to come, training while none ever came.
  enum class Bucket { kRendezvous, kStarting, kRestarting, kRestart, kTraining, kNone };
  void Move(Time now, Bucket next);
  static void Add(GoodputReport& r, Bucket bucket, double seconds);

  Time start_;
  Time since_;
  Bucket bucket_ = Bucket::kRendezvous;
  GoodputReport done_;         // closed intervals
  bool recovering_ = false;    // a failure not yet followed by a first step
  bool started_once_ = false;  // some round ran before
  long long max_step_ = -1;    // the highest step reported (this group)
  long long max_step_before_failure_ = -1;
  bool first_step_after_round_ = false;  // waiting for a round's first report
  long long steps_trained_ = 0;          // steps advanced while training (mean step time)
  long long last_step_ = -1;
};

// "goodput 93.5%: 812.3 s wall, 759.6 s training, 0.2 s rendezvous, 4.1 s startup, 31.0 s
// restarts, 17.4 s lost work (36 steps redone)".
std::string FormatGoodput(const GoodputReport& report);

}  // namespace mxrun
