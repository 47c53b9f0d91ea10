#pragma once
// Hosting the master: a gRPC server with the Rendezvous and Store services, bound to one address
// (or every interface with bind_all). Used in-process by the agent that hosts the master and by the
// standalone mxrun-master.

#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace grpc {
class Server;
}

namespace mxrun {

class MemoryStore;
class RendezvousService;
class StoreService;

struct MasterServerOptions {
  std::string host = "127.0.0.1";  // the endpoint's address; ignored with bind_all
  int port = 0;                    // 0: any free port (read it back with port())
  bool bind_all = false;           // listen on every interface
  std::string token;               // demanded on every call when non-empty
  std::string state_dir;           // keep running runs here across restarts (empty: in memory)
};

class MasterServer {
 public:
  // Errors: Unavailable when the address cannot be bound (in use, not local).
  static absl::StatusOr<std::unique_ptr<MasterServer>> Start(const MasterServerOptions& options);
  ~MasterServer();

  int port() const { return port_; }
  // "host:port" as clients should dial it.
  std::string address() const;
  // Ends every session and stops the server (waits at most `grace` for calls to finish).
  void Shutdown(std::chrono::milliseconds grace = std::chrono::milliseconds(500));
  // Blocks until Shutdown() is called from another thread.
  void Wait();

 private:
  MasterServer() = default;

  std::string host_;
  int port_ = 0;
  std::unique_ptr<MemoryStore> store_;
  std::unique_ptr<RendezvousService> rendezvous_;
  std::unique_ptr<StoreService> store_service_;
  std::unique_ptr<grpc::Server> server_;
  bool shut_down_ = false;
};

}  // namespace mxrun
