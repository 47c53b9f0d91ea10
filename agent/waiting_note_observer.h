#pragma once
// No rendezvous wait is silent: when a join has had no round for a while (5 s), and every 30 s
// after, the agent's log says what it waits for (the rendezvous' last word, or that it has not
// answered) and where (the rendezvous' description). An observer with a timer of its own.

#include <chrono>
#include <optional>
#include <string>

#include "agent/agent_observer.h"
#include "agent/process/event_loop.h"
#include "agent/process/scoped_timer.h"

namespace mxrun {

class WaitingNoteObserver final : public AgentObserver {
 public:
  static constexpr std::chrono::seconds kEvery{30};
  WaitingNoteObserver(std::string rendezvous_description, std::chrono::milliseconds first_after)
      : description_(std::move(rendezvous_description)), first_after_(first_after) {}

  void Started(EventLoop& loop) override { timer_.emplace(loop); }
  void Joining(Time now) override;
  void Registered(Time, const std::string& reason) override { reason_ = reason; }
  void RoundReady(Time, const RoundAssignment&, bool) override { Disarm(); }
  void Exited(Time, int, const std::optional<std::string>&) override { Disarm(); }

 private:
  void Note();
  void Disarm();

  std::string description_;
  std::chrono::milliseconds first_after_;
  std::optional<ScopedTimer> timer_;  // from Started: the agent's loop
  Time joined_at_{};
  std::string reason_;  // the rendezvous' last word on what this join waits for
};

}  // namespace mxrun
