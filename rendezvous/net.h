#pragma once
// Small networking helpers for rendezvous: endpoints, free ports, local addresses.

#include <string>

#include "absl/status/statusor.h"

namespace mxrun {

// The rendezvous master's port when an endpoint names none (as torchrun's c10d backend).
inline constexpr int kDefaultRendezvousPort = 29400;
// mxrun-master's metrics and status page (HTTP), beside the rendezvous port.
inline constexpr int kDefaultMasterMetricsPort = 29401;

struct HostPort {
  std::string host;
  int port = 0;
};

// "host", "host:port", "[v6]:port", "v6" (no port). `default_port` when none is given.
// Errors: InvalidArgument naming the text and the accepted forms.
absl::StatusOr<HostPort> ParseHostPort(const std::string& text, int default_port);

// "host:port" with brackets around IPv6 literals: the inverse of ParseHostPort.
std::string JoinHostPort(const std::string& host, int port);

// A TCP port that is free on `address` right now (bind to port 0 and read it back). The usual race
// applies: another process may take it before the worker binds it.
absl::StatusOr<int> PickFreePort(const std::string& address);

// The local address this machine would use to reach `host` (a UDP socket connected there; no packet
// is sent): what an agent advertises when --local_addr is not given.
absl::StatusOr<std::string> LocalAddressToward(const std::string& host, int port);

// True when something listens on `host`:`port` (a connection to it succeeds; meant for this
// machine's addresses, where a refusal is immediate). Lets an agent skip hosting a master that
// another agent on this machine runs. A probe by connection, unlike a test bind, never holds the
// port itself: agents starting together cannot make each other's bind fail.
bool PortListening(const std::string& host, int port);

// True when `host` resolves to an address of one of this machine's interfaces.
bool IsLocalHost(const std::string& host);

}  // namespace mxrun
