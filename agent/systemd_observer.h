#pragma once
// systemd's notifications (common/service_notify.h) of what the agent tells its observers: READY
// with the rendezvous' word and each round's place, STATUS and STOPPING lines, and the watchdog's
// beats on the agent's loop. Disabled outside systemd (no NOTIFY_SOCKET): every call is a no-op.

#include "agent/agent_observer.h"
#include "common/service_notify.h"

namespace mxrun {

class SystemdObserver final : public AgentObserver {
 public:
  explicit SystemdObserver(ServiceNotifier notifier) : notifier_(std::move(notifier)) {}

  void Started(EventLoop& loop) override;
  void Registered(Time, const std::string& reason) override { notifier_.Ready(reason); }
  void RoundStarted(Time now, const RoundAssignment& round,
                    const std::vector<WorkerGroup::WorkerStatus>& workers) override;
  void Status(const std::string& text, bool stopping) override;

 private:
  void WatchdogTick();

  ServiceNotifier notifier_;
  EventLoop* loop_ = nullptr;
};

}  // namespace mxrun
