#include "agent/own_observers.h"

#include <utility>

#include "agent/event_log_observer.h"
#include "agent/goodput_observer.h"
#include "agent/restart_phases_observer.h"
#include "agent/systemd_observer.h"
#include "agent/waiting_note_observer.h"

namespace mxrun {

std::vector<std::unique_ptr<AgentObserver>> MakeOwnObservers(
    const std::vector<AgentObserver*>& others, Rendezvous& rendezvous, const EventLogConfig& events,
    std::string rendezvous_description, std::chrono::milliseconds waiting_notice_after,
    ServiceNotifier notifier) {
  std::vector<std::unique_ptr<AgentObserver>> own;
  own.push_back(std::make_unique<GoodputObserver>([others](const GoodputClock& clock) {
    for (AgentObserver* observer : others) observer->GoodputChanged(clock);
  }));
  own.push_back(
      std::make_unique<RestartPhasesObserver>([others, &rendezvous](const RestartPhases& phases) {
        for (AgentObserver* observer : others) observer->RestartTimed(phases);
        rendezvous.ReportRestartPhases(phases);
      }));
  own.push_back(std::make_unique<EventLogObserver>(events));
  own.push_back(std::make_unique<WaitingNoteObserver>(std::move(rendezvous_description),
                                                      waiting_notice_after));
  own.push_back(std::make_unique<SystemdObserver>(std::move(notifier)));
  return own;
}

}  // namespace mxrun
