#pragma once
// The node's health as the agent acts on it (node/health_check.h): checked before each join and,
// with --health_check_interval, on a period while a round's workers run. An unhealthy node says
// why (the log and the observers' status), tells the rendezvous (the master's status lists it)
// and leaves with the "do not requeue" exit code.

#include <functional>
#include <memory>
#include <string>

#include "agent/node/health_check.h"
#include "agent/process/event_loop.h"
#include "rendezvous/rendezvous.h"

namespace mxrun {

class NodeHealthGate {
 public:
  // `exit_code`: an unhealthy node's (--do_not_requeue_exit_code, or 1 when that is 0).
  // `announce`: says a line (an error, on the way out) in the log and the observers' status.
  NodeHealthGate(HealthCheckConfig config, int exit_code, Rendezvous& rendezvous,
                 std::function<void(const std::string&)> announce);

  // The checks now; false, said and told to the rendezvous, when the node is unhealthy.
  bool Healthy();
  // Every --health_check_interval from now on (never when it is 0), each while `running()` says
  // the round's workers run: a failed check makes became_unhealthy() true, which the agent's loop
  // acts on. Called again (the next round), the period starts afresh.
  void CheckWhile(EventLoop& loop, std::function<bool()> running);
  bool became_unhealthy() const { return became_unhealthy_; }
  int exit_code() const { return exit_code_; }

 private:
  HealthCheckConfig config_;
  int exit_code_;
  Rendezvous& rendezvous_;
  std::function<void(const std::string&)> announce_;
  std::unique_ptr<HealthChecker> checker_;  // made at the first check (it may load NVML)
  EventLoop::TimerId timer_ = 0;            // the period's, while there is one
  bool became_unhealthy_ = false;
};

}  // namespace mxrun
