#include "rendezvous/local_rendezvous.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/strings.h"

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
  events_.Post(std::move(event));
}

void LocalRendezvous::ReportFailure(const WorkerFailure& failure) {
  RendezvousEvent event;
  event.max_restarts = config_.max_restarts;
  if (restarts_spent_ < config_.max_restarts) {
    ++restarts_spent_;
    event.kind = RendezvousEvent::Kind::kRejoin;
    event.restart = true;
    event.reason = "a worker failed";
  } else {
    event.kind = RendezvousEvent::Kind::kJobFailed;
    event.first_failure = failure;
  }
  event.restarts_spent = restarts_spent_;
  events_.Post(std::move(event));
}

void LocalRendezvous::ReportSucceeded() {
  RendezvousEvent event;
  event.kind = RendezvousEvent::Kind::kJobSucceeded;
  events_.Post(std::move(event));
}

absl::StatusOr<int> PickFreePort(const std::string& address) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* found = nullptr;
  if (int rc = getaddrinfo(address.c_str(), "0", &hints, &found); rc != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot resolve '", address, "': ", gai_strerror(rc)));
  }
  std::string last_error = "no address";
  for (addrinfo* ai = found; ai != nullptr; ai = ai->ai_next) {
    int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) continue;
    sockaddr_storage bound{};
    socklen_t length = sizeof bound;
    if (bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 &&
        getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &length) == 0) {
      close(fd);
      freeaddrinfo(found);
      const int port = bound.ss_family == AF_INET6
                           ? ntohs(reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port)
                           : ntohs(reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
      return port;
    }
    last_error = ErrnoText(errno);
    close(fd);
  }
  freeaddrinfo(found);
  return absl::UnavailableError(
      absl::StrCat("cannot bind a free port on '", address, "': ", last_error));
}

}  // namespace mxrun
