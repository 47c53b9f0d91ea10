#include "agent/store/workers_store_rendezvous.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace mxrun {

WorkersStoreRendezvous::WorkersStoreRendezvous(std::unique_ptr<Rendezvous> inner,
                                               WorkersStoreConfig config)
    : inner_(std::move(inner)), config_(std::move(config)) {}

WorkersStoreRendezvous::~WorkersStoreRendezvous() = default;

std::vector<RendezvousEvent> WorkersStoreRendezvous::TakeEvents() {
  std::vector<RendezvousEvent> events = inner_->TakeEvents();
  for (RendezvousEvent& event : events) {
    if (event.kind != RendezvousEvent::Kind::kRoundReady || !Hosts(event.round)) continue;
    if (absl::Status hosted = Host(event.round); !hosted.ok()) {
      event.kind = RendezvousEvent::Kind::kError;
      event.error = hosted;
    }
  }
  return events;
}

bool WorkersStoreRendezvous::Hosts(const RoundAssignment& round) const {
  if (config_.from_rounds) return round.use_agent_store && round.node_rank == 0;
  return round.num_nodes == 1;
}

absl::Status WorkersStoreRendezvous::Host(RoundAssignment& round) {
  std::lock_guard<std::mutex> lock(mutex_);
  const std::string host = config_.from_rounds ? round.master_addr : config_.host;
  const int port = config_.from_rounds ? round.master_port : config_.fixed_port;
  run_id_ = round.run_id;
  // Earlier rounds' stores that no one uses any more are closed; the newest few with clients stay.
  for (auto it = earlier_.begin(); it != earlier_.end();) {
    if ((*it)->Counts().clients == 0) {
      Retire(std::move(*it));
      it = earlier_.erase(it);
    } else {
      ++it;
    }
  }
  if (current_ != nullptr) {
    if (port != 0 && current_->port() == port) {
      Retire(std::move(current_));  // the new round's store takes over the one port
    } else {
      earlier_.push_back(std::move(current_));
      if (earlier_.size() > kKeptRounds) {
        Retire(std::move(earlier_.front()));
        earlier_.erase(earlier_.begin());
      }
    }
  }
  StoreServer::Options options = config_.server;
  options.host = host;
  options.port = port;
  absl::StatusOr<std::unique_ptr<StoreServer>> started = StoreServer::Start(std::move(options));
  if (!started.ok()) {
    const char* hint = config_.from_rounds ? " (the port this agent joined with was taken since)"
                       : port != 0         ? " (--master_port is taken? give another, or none)"
                                           : "";
    return absl::UnavailableError(
        absl::StrCat("round ", round.round, ": ", started.status().message(), hint));
  }
  current_ = std::move(*started);
  round.master_port = current_->port();
  round.use_agent_store = true;
  return absl::OkStatus();
}

void WorkersStoreRendezvous::Retire(std::unique_ptr<StoreServer> server) {
  const StoreCounts counts = server->Counts();
  for (std::size_t op = 0; op < counts.requests.size(); ++op) {
    retired_requests_[op] += counts.requests[op];
  }
  retired_refused_ += server->refused_clients();
  server.reset();  // stops its thread, closes its connections
}

std::optional<StoreTotals> WorkersStoreRendezvous::Totals() const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (current_ == nullptr) return std::nullopt;
  StoreTotals totals;
  totals.run_id = run_id_;
  totals.requests = retired_requests_;
  totals.refused_clients = retired_refused_;
  auto add = [&](const StoreServer& server) {
    const StoreCounts counts = server.Counts();
    for (std::size_t op = 0; op < counts.requests.size(); ++op) {
      totals.requests[op] += counts.requests[op];
    }
    totals.refused_clients += server.refused_clients();
    totals.clients += counts.clients;
    totals.waiting_clients += counts.waiting_clients;
    ++totals.stores;
    return counts;
  };
  for (const auto& server : earlier_) add(*server);
  const StoreCounts current = add(*current_);
  totals.keys = current.keys;
  totals.bytes = current.bytes;
  return totals;
}

}  // namespace mxrun
