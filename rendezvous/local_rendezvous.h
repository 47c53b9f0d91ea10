#pragma once
// Single-node rendezvous: the round is this node alone, the restart budget is counted here.
// Used when the job has one node (--nnodes=1, the default) and no master is asked for.

#include <string>

#include "absl/status/statusor.h"
#include "rendezvous/event_queue.h"
#include "common/repeated_failure.h"
#include "rendezvous/rendezvous.h"

namespace mxrun {

struct LocalRendezvousConfig {
  std::string run_id;
  int local_world_size = 1;
  int max_restarts = 0;
  std::string master_addr;    // MASTER_ADDR given to workers
  int master_port = 0;        // 0: pick a free port on master_addr for every round
};

class LocalRendezvous final : public Rendezvous {
 public:
  explicit LocalRendezvous(LocalRendezvousConfig config);

  void Join() override;
  void ReportFailure(const WorkerFailure& failure) override;
  void ReportSucceeded() override;
  void Leave() override {}
  int EventFd() const override { return events_.fd(); }
  std::vector<RendezvousEvent> TakeEvents() override { return events_.Take(); }

 private:
  LocalRendezvousConfig config_;
  RendezvousEventQueue events_;
  int round_ = 0;
  int restarts_spent_ = 0;
  RepeatedFailures failures_;  // every attempt's failure: the same each time?
};

}  // namespace mxrun
