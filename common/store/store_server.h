#pragma once
// The workers' store, served: a TCP server that PyTorch's TCPStore clients (2.13, 2.14, 2.15)
// talk to as they talk to the store torchrun's agent hosts, so that `init_process_group` and every
// later group of a job find it listening before any rank arrives and it outlives any rank.
// This file is the shell only: non-blocking sockets on one epoll loop, on a thread of its own so
// that nothing the agent does (forking workers, stopping a group) delays a reply. Bytes go through
// the pure decoder (store_wire.h), decisions through the pure state (store_state.h).
//
// What one client can do to the others is bounded:
// - memory: a request over StoreWireLimits (PyTorch's own: 8 KiB keys, 8 MiB values, 128K keys
//   a request; here also max_request_bytes) or past StoreStateLimits::max_bytes closes that client,
//   and a client that does not read its replies is not read from once max_output_bytes wait for it;
// - file descriptors: at most max_clients connections; past it the longest-connected one that has
//   not validated is dropped, else the newcomer;
// - time: one thread serves everyone without blocking; a read takes at most kReadBurst bytes of a
//   client before the next one's turn; a connection that has not sent VALIDATE within
//   validate_timeout is closed (PyTorch's clients send it as they connect).
// A client that breaks the protocol is closed with one log line saying why (the protocol has no
// error reply; PyTorch's call then fails with a connection error).

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/store/store_state.h"
#include "common/store/store_wire.h"

namespace mxrun {

class StoreServer {
 public:
  static constexpr std::size_t kReadBurst = 256 * 1024;

  struct Options {
    // The address to listen on: a name ("localhost": every address it resolves to) or a number
    // ("::" or "0.0.0.0": every interface).
    std::string host = "127.0.0.1";
    int port = 0;  // 0: the kernel picks one (port() says which)
    StoreWireLimits wire;
    StoreStateLimits state;
    std::size_t max_request_bytes = 64 * 1024 * 1024;  // one request, all fields
    std::size_t max_output_bytes = 64 * 1024 * 1024;   // replies a client has not read yet
    std::size_t max_clients = 0;  // 0: as many as the open-file limit leaves (less a reserve)
    std::chrono::milliseconds validate_timeout{10000};
    // Where a closed client's reason goes (one line each); null: standard error.
    std::function<void(const std::string&)> log;
  };

  // Binds and starts serving; an error says what could not be bound.
  static absl::StatusOr<std::unique_ptr<StoreServer>> Start(Options options);
  ~StoreServer();  // stops the thread and closes every connection
  StoreServer(const StoreServer&) = delete;
  StoreServer& operator=(const StoreServer&) = delete;

  int port() const { return port_; }
  // "HOST:PORT" as bound.
  const std::string& address() const { return address_; }
  // What the store holds and has served (thread-safe).
  StoreCounts Counts() const;
  // Connections closed because they broke the protocol or a bound, so far (thread-safe).
  std::uint64_t refused_clients() const;

 private:
  struct Impl;
  explicit StoreServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
  int port_ = 0;
  std::string address_;
};

}  // namespace mxrun
