#pragma once
// The agent's own observers (agent_observer.h), in the order they are told: time accounting
// (goodput), the restart phases, event records (--event-log-handler), the note while no round
// comes, systemd's notifications. What the first two work out goes on to `others` (the metrics),
// and the restart phases to the rendezvous as well (the master's timings).

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "agent/agent_observer.h"
#include "agent/event_log.h"
#include "common/service_notify.h"
#include "rendezvous/rendezvous.h"

namespace mxrun {

std::vector<std::unique_ptr<AgentObserver>> MakeOwnObservers(
    const std::vector<AgentObserver*>& others, Rendezvous& rendezvous, const EventLogConfig& events,
    std::string rendezvous_description, std::chrono::milliseconds waiting_notice_after,
    ServiceNotifier notifier);

}  // namespace mxrun
