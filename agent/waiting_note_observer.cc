#include "agent/waiting_note_observer.h"

#include "spdlog/spdlog.h"

namespace mxrun {

void WaitingNoteObserver::Joining(Time now) {
  if (!timer_) return;
  joined_at_ = now;
  reason_.clear();
  timer_->At(now + first_after_, [this] { Note(); });
}

void WaitingNoteObserver::Disarm() {
  if (timer_) timer_->Cancel();
}

void WaitingNoteObserver::Note() {
  const auto now = Time::clock::now();
  const double waited = std::chrono::duration<double>(now - joined_at_).count();
  spdlog::info("no round yet after {:.0f} s: {} ({})", waited,
               reason_.empty() ? "the rendezvous has not answered this node's join" : reason_,
               description_.empty() ? "the local rendezvous" : description_);
  timer_->At(now + kEvery, [this] { Note(); });
}

}  // namespace mxrun
