#include "agent/restart_clock.h"

namespace mxrun {
namespace {

double Seconds(RestartClock::Time from, RestartClock::Time to) {
  return std::max(0.0, std::chrono::duration<double>(to - from).count());
}

}  // namespace

void RestartClock::FailureSeen(Time now, const std::string& cause) {
  if (open_ && !open_->running) return;  // the same restart: its workers are not running yet
  if (open_) Finish();                   // running, no step reported: it is done as it stands
  open_ = Open{};
  open_->seen = now;
  open_->phases.cause = cause;
}

void RestartClock::WorkersStopped(Time now) {
  if (!open_ || open_->stopped || open_->ready) return;
  open_->stopped = now;
  open_->phases.stop_s = Seconds(open_->seen, now);
}

void RestartClock::RoundReady(Time now, int round, bool in_process) {
  if (!open_ || open_->ready) return;
  // Nothing was running to stop (the failure came while this node waited): no stop phase.
  const Time stopped = open_->stopped.value_or(open_->seen);
  open_->ready = now;
  open_->phases.round = round;
  open_->phases.in_process = in_process;
  open_->phases.reform_s = Seconds(stopped, now);
}

void RestartClock::RoundStarted(Time now) {
  if (!open_ || !open_->ready || open_->running) return;
  open_->running = now;
  open_->phases.start_s = Seconds(*open_->ready, now);
}

void RestartClock::Progress(Time now) {
  if (!open_ || !open_->running) return;
  open_->phases.first_step_s = Seconds(*open_->running, now);
  Finish();
}

void RestartClock::Ended() {
  if (open_) Finish();
}

void RestartClock::Finish() {
  const bool formed = open_->ready.has_value();
  RestartPhases phases = std::move(open_->phases);
  open_.reset();
  if (!formed) return;  // no round formed after it: the job ended, nothing restarted
  if (done_) done_(phases);
  finished_.push_back(std::move(phases));
  if (finished_.size() > kKept) {
    finished_.pop_front();
    ++dropped_;
  }
}

}  // namespace mxrun
