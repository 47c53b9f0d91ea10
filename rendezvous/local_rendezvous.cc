#include "rendezvous/local_rendezvous.h"

#include "absl/status/status.h"
#include "rendezvous/net.h"

namespace mxrun {

LocalRendezvous::LocalRendezvous(LocalRendezvousConfig config) : config_(std::move(config)) {}

void LocalRendezvous::Join() {
  RendezvousEvent event;
  event.kind = RendezvousEvent::Kind::kRoundReady;
  RoundAssignment& round = event.round;
  round.run_id = config_.run_id;
  round.round = round_++;
  round.node_rank = 0;
  round.num_nodes = 1;
  round.local_world_size = config_.local_world_size;
  round.global_rank_base = 0;
  round.world_size = config_.local_world_size;
  round.master_addr = config_.master_addr;
  round.master_port = config_.master_port;
  round.restart_count = restarts_spent_;
  round.max_restarts = config_.max_restarts;
  round.use_agent_store = false;
  if (round.master_port == 0) {
    absl::StatusOr<int> port = PickFreePort(config_.master_addr);
    if (!port.ok()) {
      event.kind = RendezvousEvent::Kind::kError;
      event.error = port.status();
    } else {
      round.master_port = *port;
    }
  }
  stragglers_.Reset();
  judged_.clear();
  round_assignment_ = event.round;
  events_.Post(std::move(event));
}

void LocalRendezvous::ReportProgress(const std::vector<RankProgress>& ranks) {
  if (config_.stragglers.steps <= 0) return;
  for (const RankProgress& rank : ranks) {
    auto [last, first] = judged_.emplace(rank.global_rank, rank.at);
    if (!first && last->second == rank.at) continue;  // judged already: no new report
    last->second = rank.at;
    if (std::optional<StragglerNews> news =
            stragglers_.Report(rank.global_rank, rank.step, rank.step_seconds, rank.busy_seconds)) {
      RendezvousEvent event;
      event.kind = RendezvousEvent::Kind::kStraggler;
      event.round = round_assignment_;
      event.straggler = *news;
      events_.Post(std::move(event));
    }
  }
}

void LocalRendezvous::ReportFailure(const WorkerFailure& failure) {
  RendezvousEvent event;
  event.max_restarts = config_.max_restarts;
  failures_.Add(failure);
  if (restarts_spent_ < config_.max_restarts) {
    ++restarts_spent_;
    event.kind = RendezvousEvent::Kind::kRejoin;
    event.restart = true;
    event.reason = "a worker failed";
  } else {
    event.kind = RendezvousEvent::Kind::kJobFailed;
    event.first_failure = failure;
    event.same_failure_every_attempt = failures_.AllSame();
    event.failure_signature = failures_.signature();
  }
  event.restarts_spent = restarts_spent_;
  events_.Post(std::move(event));
}

void LocalRendezvous::ReportSucceeded() {
  RendezvousEvent event;
  event.kind = RendezvousEvent::Kind::kJobSucceeded;
  events_.Post(std::move(event));
}

}  // namespace mxrun
