#include "agent/goodput.h"

#include <algorithm>
#include <cstdio>

namespace mxrun {

GoodputClock::GoodputClock(Time start) : start_(start), since_(start) {}

void GoodputClock::Add(GoodputReport& r, Bucket bucket, double seconds) {
  switch (bucket) {
    case Bucket::kRendezvous:
      r.rendezvous += seconds;
      break;
    case Bucket::kStarting:
      (r.progress_reported ? r.startup : r.training) += seconds;
      break;
    case Bucket::kRestarting:
      (r.progress_reported ? r.restart : r.training) += seconds;
      break;
    case Bucket::kRestart:
      r.restart += seconds;
      break;
    case Bucket::kTraining:
      r.training += seconds;
      break;
    case Bucket::kNone:
      break;
  }
}

void GoodputClock::Move(Time now, Bucket next) {
  if (now > since_) Add(done_, bucket_, std::chrono::duration<double>(now - since_).count());
  since_ = std::max(since_, now);
  bucket_ = next;
}

void GoodputClock::Joining(Time now) { Move(now, Bucket::kRendezvous); }

void GoodputClock::RoundStarted(Time now) {
  // Until its first progress report the round is starting up (or restarting, after a failure);
  // a worker that never reports is training all along (below).
  Move(now, recovering_ ? Bucket::kRestarting : Bucket::kStarting);
  first_step_after_round_ = true;
  started_once_ = true;
  last_step_ = -1;
}

void GoodputClock::Progress(Time now, long long step) {
  done_.progress_reported = true;  // before Move: the round's start-up is now known as such
  if (first_step_after_round_) {
    first_step_after_round_ = false;
    if (recovering_) {
      // The new group resumed from step - 1: what lies between that and the last step reported
      // before the failure was done twice.
      const long long redone = std::max(0LL, max_step_before_failure_ - (step - 1));
      done_.steps_redone += redone;
      const double mean = steps_trained_ > 0 ? done_.training / steps_trained_ : 0;
      done_.lost_work += redone * mean;
      done_.training -= std::min(done_.training, redone * mean);
      recovering_ = false;
    }
    Move(now, Bucket::kTraining);
    last_step_ = step;
    max_step_ = std::max(max_step_, step);
    return;
  }
  if (bucket_ != Bucket::kTraining) Move(now, Bucket::kTraining);
  if (last_step_ >= 0 && step > last_step_) steps_trained_ += step - last_step_;
  last_step_ = std::max(last_step_, step);
  max_step_ = std::max(max_step_, step);
}

void GoodputClock::Failure(Time now) {
  if (!recovering_) max_step_before_failure_ = max_step_;
  recovering_ = true;
  Move(now, Bucket::kRestart);
}

void GoodputClock::Ended(Time now) { Move(now, Bucket::kNone); }

GoodputReport GoodputClock::Report(Time now) const {
  GoodputReport r = done_;
  if (now > since_) Add(r, bucket_, std::chrono::duration<double>(now - since_).count());
  r.wall = std::chrono::duration<double>(std::max(now, since_) - start_).count();
  return r;
}

std::string FormatGoodput(const GoodputReport& r) {
  char line[512];
  std::snprintf(line, sizeof line,
                "goodput %.1f%%: %.1f s wall, %.1f s training, %.1f s rendezvous, %.1f s startup, "
                "%.1f s restarts, %.1f s lost work (%lld steps redone)%s",
                100 * r.ratio(), r.wall, r.training, r.rendezvous, r.startup, r.restart,
                r.lost_work, r.steps_redone,
                r.progress_reported ? ""
                                    : "; no progress reports: steps unknown, a round's whole "
                                      "run counted as training");
  return line;
}

}  // namespace mxrun
