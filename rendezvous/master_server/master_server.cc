#include "rendezvous/master_server/master_server.h"

#include <grpcpp/grpcpp.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "rendezvous/grpc/tls_credentials.h"
#include "rendezvous/master_server/memory_store.h"
#include "rendezvous/master_server/rendezvous_service.h"
#include "rendezvous/master_server/store_service.h"
#include "rendezvous/master_state/master_state_file.h"
#include "rendezvous/net.h"

namespace mxrun {

std::optional<std::string> OpenDoorWarning(const MasterServerOptions& options,
                                           const std::string& token_hint,
                                           const std::string& tls_hint) {
  if (!options.token.empty() || options.tls.enabled()) return std::nullopt;
  const std::string& host = options.host;
  const bool loopback =
      !options.bind_all &&
      (host == "localhost" || absl::StartsWith(host, "127.") || host == "::1" || host == "[::1]");
  if (loopback) return std::nullopt;
  return absl::StrCat(
      "the rendezvous master listens on ", options.bind_all ? "every interface" : host,
      " with neither a token nor TLS: anyone who can reach its port can join a run, take its "
      "ranks, read and write its store and end it. Close it with ",
      token_hint, " or with ", tls_hint, " (docs/CONTRACT.md, \"Who may talk to a master\")");
}

absl::StatusOr<std::unique_ptr<MasterServer>> MasterServer::Start(
    const MasterServerOptions& options, std::unique_ptr<MasterStateStore> store,
    std::function<void()> on_deposed) {
  std::unique_ptr<MasterServer> server(new MasterServer());
  server->host_ = options.bind_all ? "0.0.0.0" : options.host;
  server->advertise_host_ = options.advertise_host.empty() ? server->host_ : options.advertise_host;
  server->store_ = std::make_unique<MemoryStore>();
  server->rendezvous_ = std::make_unique<RendezvousService>(options.token);
  server->rendezvous_->ServeOnlyRun(options.only_run_id);
  if (!store && !options.state_dir.empty()) {
    absl::StatusOr<std::unique_ptr<MasterStateFile>> file =
        MasterStateFile::Open(options.state_dir);
    if (!file.ok()) return file.status();
    store = std::move(*file);
  }
  if (store) {
    if (absl::Status restored =
            server->rendezvous_->KeepStateIn(std::move(store), std::move(on_deposed));
        !restored.ok()) {
      server->rendezvous_->Shutdown();
      return restored;
    }
  }
  server->store_service_ = std::make_unique<StoreService>(*server->store_, options.token);
  server->store_service_->ServeOnlyRun(options.only_run_id);

  grpc::ServerBuilder builder;
  const std::string listen = JoinHostPort(server->host_, options.port);
  builder.AddListeningPort(listen, ServerCredentials(options.tls), &server->port_);
  builder.RegisterService(server->rendezvous_.get());
  builder.RegisterService(server->store_service_.get());
  // A dead peer's TCP connection is noticed by keepalive even if the agent's own lease has not
  // expired yet; SO_REUSEPORT off so that a second master on the same port fails loudly.
  // Flight-recorder dumps of a node's ranks after a hang (FlightRecords) run to megabytes; an
  // agent caps its message at kMaxFlightMessage (flight_records.h).
  builder.SetMaxReceiveMessageSize(64 << 20);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, 10000);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 5000);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 1000);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  // TLS records of at most 4 KiB (gRPC's default 16 KiB): the frame protector's buffer is that
  // big for every connection, and the master's messages are small. 9 KiB less per agent
  // (docs/benchmarks/operations.md, the cost of mutual TLS).
  builder.AddChannelArgument(GRPC_ARG_TSI_MAX_FRAME_SIZE, 4096);
  server->server_ = builder.BuildAndStart();
  if (server->server_ == nullptr || server->port_ == 0) {
    server->rendezvous_->Shutdown();
    return absl::UnavailableError(absl::StrCat(
        "cannot listen on ", listen, " (address in use, or not an address of this machine)"));
  }
  return server;
}

MasterServer::~MasterServer() { Shutdown(); }

std::string MasterServer::address() const { return JoinHostPort(advertise_host_, port_); }

void MasterServer::Shutdown(std::chrono::milliseconds grace) {
  if (shut_down_) return;
  shut_down_ = true;
  if (rendezvous_) rendezvous_->Shutdown();
  if (server_) server_->Shutdown(std::chrono::system_clock::now() + grace);
}

void MasterServer::ForgetAgent(const std::string& agent_id, const std::string& why) {
  rendezvous_->ForgetAgent(agent_id, why);
}

void MasterServer::Wait() {
  if (server_) server_->Wait();
}

std::vector<RunSnapshot> MasterServer::Snapshot() const { return rendezvous_->Snapshot(); }

}  // namespace mxrun
