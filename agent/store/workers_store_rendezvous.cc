#include "agent/store/workers_store_rendezvous.h"

#include <algorithm>
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
    if (event.kind != RendezvousEvent::Kind::kRoundReady || event.round.num_nodes != 1) continue;
    if (absl::Status hosted = Host(event.round); !hosted.ok()) {
      event.kind = RendezvousEvent::Kind::kError;
      event.error = hosted;
    }
  }
  return events;
}

absl::Status WorkersStoreRendezvous::Host(RoundAssignment& round) {
  // Earlier rounds' stores that no one uses any more are closed; the newest few with clients stay.
  std::erase_if(earlier_, [](const auto& server) { return server->Counts().clients == 0; });
  if (current_ != nullptr) {
    if (config_.fixed_port != 0) {
      current_.reset();  // the new round's store takes over the one port
    } else {
      earlier_.push_back(std::move(current_));
      if (earlier_.size() > kKeptRounds) earlier_.erase(earlier_.begin());
    }
  }
  StoreServer::Options options = config_.server;
  options.host = config_.host;
  options.port = config_.fixed_port;
  absl::StatusOr<std::unique_ptr<StoreServer>> started = StoreServer::Start(std::move(options));
  if (!started.ok()) {
    return absl::UnavailableError(absl::StrCat(
        "round ", round.round, ": ", started.status().message(),
        config_.fixed_port != 0 ? " (--master_port is taken? give another, or none)" : ""));
  }
  current_ = std::move(*started);
  round.master_port = current_->port();
  round.use_agent_store = true;
  return absl::OkStatus();
}

}  // namespace mxrun
