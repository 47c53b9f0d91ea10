#include "agent/node_health_gate.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace mxrun {

NodeHealthGate::NodeHealthGate(HealthCheckConfig config, int exit_code, Rendezvous& rendezvous,
                               std::function<void(const std::string&)> announce)
    : config_(std::move(config)),
      exit_code_(exit_code),
      rendezvous_(rendezvous),
      announce_(std::move(announce)) {}

bool NodeHealthGate::Healthy() {
  if (!checker_) checker_ = std::make_unique<HealthChecker>(config_);
  const std::vector<std::string> problems = checker_->Check();
  if (problems.empty()) return true;
  const std::string why = absl::StrJoin(problems, "; ");
  announce_(absl::StrCat("this node is unhealthy: ", why, "; it does not join the job (exit ",
                         exit_code(), ", do not requeue here)"));
  rendezvous_.ReportUnhealthy(why);
  return false;
}

void NodeHealthGate::CheckWhile(EventLoop& loop, std::function<bool()> running) {
  if (config_.interval.count() <= 0) return;
  loop.Cancel(timer_);
  timer_ = loop.Every(EventLoop::Deadline::clock::now() + config_.interval, config_.interval,
                      [this, running = std::move(running)] {
                        if (running() && !became_unhealthy_ && !Healthy()) {
                          became_unhealthy_ = true;
                        }
                      });
}

}  // namespace mxrun
