#pragma once
// Where this node's time went (goodput.h), accounted from what the agent tells its observers, and
// said in one line at the end. Each change is passed on (`changed`: the metrics' gauges).

#include <functional>

#include "agent/agent_observer.h"

namespace mxrun {

class GoodputObserver final : public AgentObserver {
 public:
  using Changed = std::function<void(const GoodputClock&)>;
  explicit GoodputObserver(Changed changed) : changed_(std::move(changed)) {}

  void Joining(Time now) override { Account(&GoodputClock::Joining, now); }
  void RoundStarted(Time now, const RoundAssignment&,
                    const std::vector<WorkerGroup::WorkerStatus>&) override {
    Account(&GoodputClock::RoundStarted, now);
  }
  void WorkerFailed(Time now, const WorkerFailure&) override {
    Account(&GoodputClock::Failure, now);
  }
  void Reforming(Time now, bool, const std::string&) override {
    Account(&GoodputClock::Failure, now);
  }
  void Progress(Time now, int, int, const WorkerControlMessage& report) override;
  void GroupSucceeded(Time now, const std::vector<WorkerGroup::WorkerStatus>&) override {
    Account(&GoodputClock::Ended, now);
  }
  void Exited(Time now, int exit_code, const std::optional<std::string>& why_failed) override;

 private:
  void Account(void (GoodputClock::*event)(Time), Time now);

  GoodputClock clock_{Time::clock::now()};
  Changed changed_;
};

}  // namespace mxrun
