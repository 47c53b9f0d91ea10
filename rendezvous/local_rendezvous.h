#pragma once
// Single-node rendezvous: the round is this node alone, the restart budget is counted here, and
// its ranks' stragglers are judged here as a master judges a whole job's (kStraggler).
// Used when the job has one node (--nnodes=1, the default) and no master is asked for.

#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "common/repeated_failure.h"
#include "common/straggler_watch.h"
#include "rendezvous/event_queue.h"
#include "rendezvous/rendezvous.h"

namespace mxrun {

struct LocalRendezvousConfig {
  std::string run_id;
  int local_world_size = 1;
  int max_restarts = 0;
  std::string master_addr;   // MASTER_ADDR given to workers
  int master_port = 0;       // 0: pick a free port on master_addr for every round
  StragglerRule stragglers;  // --straggler_factor, --straggler_steps (0: never judged)
};

class LocalRendezvous final : public Rendezvous {
 public:
  explicit LocalRendezvous(LocalRendezvousConfig config);

  void Join() override;
  void ReportFailure(const WorkerFailure& failure) override;
  void ReportSucceeded() override;
  void ReportProgress(const std::vector<RankProgress>& ranks) override;
  void Leave() override {}
  int EventFd() const override { return events_.fd(); }
  std::vector<RendezvousEvent> TakeEvents() override { return events_.Take(); }

 private:
  LocalRendezvousConfig config_;
  RendezvousEventQueue events_;
  int round_ = 0;
  int restarts_spent_ = 0;
  RepeatedFailures failures_;  // every attempt's failure: the same each time?
  StragglerWatch stragglers_{config_.stragglers};
  RoundAssignment round_assignment_;  // the round the ranks' reports are about
  std::map<int, std::chrono::steady_clock::time_point> judged_;  // by rank: the report judged last
};

}  // namespace mxrun
