#pragma once
// Single-node rendezvous: the round is this node alone, the restart budget is counted here.
// Used for --standalone and for --nnodes=1 in static mode.

#include <string>

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

  absl::StatusOr<RoundAssignment> NextRound() override;
  absl::StatusOr<FailureDecision> ReportGroupFailure(const WorkerFailure& failure) override;
  absl::Status ReportSuccess() override;

 private:
  LocalRendezvousConfig config_;
  int round_ = 0;
  int restarts_spent_ = 0;
};

// A TCP port that is free on `address` right now (bind to port 0 and read it back). The usual race
// applies: another process may take it before the worker binds it.
absl::StatusOr<int> PickFreePort(const std::string& address);

}  // namespace mxrun
