#pragma once
// Hosting the master: a gRPC server with the Rendezvous and Store services, bound to one address
// (or every interface with bind_all). Used in-process by the agent that hosts the master and by the
// standalone mxrun-master.

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "common/tls_files.h"

#include "absl/status/statusor.h"
#include "rendezvous/master_state/master_state_store.h"

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
  std::string advertise_host;      // the host in address() (default: `host`, or 0.0.0.0)
  std::string token;               // demanded on every call when non-empty
  std::string state_dir;           // keep running runs here across restarts (empty: in memory)
  TlsFiles tls;                    // mutual TLS (tls_credentials.h); none: plaintext
  // Set when an agent hosts the master for its own run: no other run may use it
  // (RendezvousService::ServeOnlyRun). Empty: any run (mxrun-master).
  std::string only_run_id;
};

// One warning, as etcd gives one, when a master would listen beyond loopback (bind_all, or an
// address that is not 127.0.0.0/8, ::1 or localhost) with neither a token nor mutual TLS: anyone
// who reaches the port could join a run, take its ranks, read and write its store, and end it.
// `token_hint` and `tls_hint` name the caller's own way to close it (flags differ between
// mxrun-master and an agent). nullopt: nothing to say.
std::optional<std::string> OpenDoorWarning(const MasterServerOptions& options,
                                           const std::string& token_hint,
                                           const std::string& tls_hint);

class MasterServer {
 public:
  // Errors: Unavailable when the address cannot be bound (in use, not local); the state store's
  // errors. `store` (instead of options.state_dir) keeps the state elsewhere, such as in etcd;
  // `on_deposed` as RendezvousService::KeepStateIn.
  static absl::StatusOr<std::unique_ptr<MasterServer>> Start(
      const MasterServerOptions& options, std::unique_ptr<MasterStateStore> store = nullptr,
      std::function<void()> on_deposed = {});
  ~MasterServer();

  int port() const { return port_; }
  // "host:port" as clients should dial it.
  std::string address() const;
  // Ends every session and stops the server (waits at most `grace` for calls to finish).
  void Shutdown(std::chrono::milliseconds grace = std::chrono::milliseconds(500));
  // Blocks until Shutdown() is called from another thread.
  void Wait();
  // The restored members of agent `agent_id` are gone (RendezvousService::ForgetAgent).
  void ForgetAgent(const std::string& agent_id, const std::string& why);
  // Every run as of now (for the metrics and the status page). Thread-safe.
  std::vector<RunSnapshot> Snapshot() const;

 private:
  MasterServer() = default;

  std::string host_;
  std::string advertise_host_;
  int port_ = 0;
  std::unique_ptr<MemoryStore> store_;
  std::unique_ptr<RendezvousService> rendezvous_;
  std::unique_ptr<StoreService> store_service_;
  std::unique_ptr<grpc::Server> server_;
  bool shut_down_ = false;
};

}  // namespace mxrun
