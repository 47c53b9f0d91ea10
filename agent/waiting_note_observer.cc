#include "agent/waiting_note_observer.h"

#include "spdlog/spdlog.h"

namespace mxrun {

void WaitingNoteObserver::Joining(Time now) {
  if (loop_ == nullptr) return;
  Disarm();
  joined_at_ = now;
  reason_.clear();
  timer_ = loop_->At(now + first_after_, [this] { Note(); });
  armed_ = true;
}

void WaitingNoteObserver::Disarm() {
  if (armed_ && loop_ != nullptr) loop_->Cancel(timer_);
  armed_ = false;
}

void WaitingNoteObserver::Note() {
  const auto now = Time::clock::now();
  const double waited = std::chrono::duration<double>(now - joined_at_).count();
  spdlog::info("no round yet after {:.0f} s: {} ({})", waited,
               reason_.empty() ? "the rendezvous has not answered this node's join" : reason_,
               description_.empty() ? "the local rendezvous" : description_);
  timer_ = loop_->At(now + kEvery, [this] { Note(); });
}

}  // namespace mxrun
