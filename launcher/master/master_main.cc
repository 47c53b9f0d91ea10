// mxrun-master: the rendezvous master on its own, for a head node (a systemd service) that outlives
// any training node. Prints "mxrun-master listening on HOST:PORT" once it serves.
//
//   mxrun-master [--host=ADDR] [--port=29400] [--bind_all] [--token_file=PATH] [--state_dir=DIR]
//                [--cert=PEM --key=PEM --cacert=PEM]   (mutual TLS; SIGHUP checks replaced files)
//                [--metrics_port=29401|0|off] [--metrics_tls]   (Prometheus metrics at /metrics;
//                 the port also as MXRUN_MASTER_METRICS_PORT)
//                [--config=FILE.toml] [--print-config]   (every flag also as MXRUN_MASTER_<FLAG>)
//   mxrun-master --rdzv_backend=etcd --rdzv_endpoint=ETCD[,ETCD...] [--service=NAME]
//                [--rdzv_conf=protocol=https,cacert=...,cert=...,key=...,lease_ttl=2,etcd_prefix=/mxrun]
//                [--host=ADDR] [--port=0] [--bind_all] [--token_file=PATH]
//                [--cert=PEM --key=PEM --cacert=PEM]   (mutual TLS with the agents, apart from
//                etcd's)
// The token is read from --token_file, else from MXRUN_RDZV_TOKEN. SIGTERM or SIGINT stop it.
// With etcd, any number of replicas run as candidates of service NAME (default "default"): one
// serves, its state in etcd, and another takes over within the lease TTL when it dies; agents
// follow with --rdzv_backend=etcd --rdzv_conf=master_service=NAME (and, with --cert, the agents'
// master_cert, master_key, master_cacert). It prints
// "mxrun-master candidate for service NAME" at once, and each time it wins "rendezvous master
// elected in etcd (...): serving on HOST:PORT".

#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "common/env_contract.h"
#include "common/http/metrics_endpoint.h"
#include "common/http/tls/http_tls.h"
#include "common/service_notify.h"
#include "common/tls_files.h"
#include "launcher/master/master_flags.h"
#include "launcher/token.h"
#include "rendezvous/etcd/etcd_leadership.h"
#include "rendezvous/grpc/grpc_logs.h"
#include "rendezvous/grpc/served_tls_files.h"
#include "rendezvous/grpc/tls_credentials.h"
#include "rendezvous/master_server/master_endpoint.h"
#include "rendezvous/master_server/master_server.h"
#include "rendezvous/net.h"

extern char** environ;

namespace {

// SIGHUP: the certificate files are verified and, when they pass, put in service (gRPC takes them
// for new handshakes within a second); when they do not, the previous ones stay in service and the
// reason is said (served_tls_files.h).
void ReloadCertificates(mxrun::ServedTlsFiles* served) {
  if (served == nullptr) {
    std::fprintf(stderr, "mxrun-master: SIGHUP: no certificates to re-read (plaintext)\n");
  } else if (absl::Status reloaded = served->Reload(); !reloaded.ok()) {
    std::fprintf(stderr,
                 "mxrun-master: SIGHUP: refused the new certificate files: %s; the "
                 "previous ones stay in service\n",
                 std::string(reloaded.message()).c_str());
  } else {
    std::fprintf(stderr,
                 "mxrun-master: SIGHUP: certificate files verified and re-read; new "
                 "connections use them within %u s, established sessions go on\n",
                 mxrun::kTlsRefreshSeconds);
  }
}

// Serves the metrics and the status page on `base` (when its port is not negative) from
// `snapshot`: the runs, or nullopt for an etcd-elected replica that does not lead now (`leader`
// then says where the one that leads serves). False once an error is printed: a given port that
// cannot be served, or TLS that cannot be set up. The default port taken only warns.
bool StartMasterMetrics(const mxrun::HttpServer::Options& base, bool metrics_tls, bool port_given,
                        const mxrun::TlsFiles& tls,
                        std::function<std::optional<std::vector<mxrun::RunSnapshot>>()> snapshot,
                        std::function<std::string()> leader,
                        std::unique_ptr<mxrun::HttpServer>& out) {
  if (base.port < 0) return true;
  mxrun::HttpServer::Options http = base;
  if (metrics_tls) {
    absl::StatusOr<std::shared_ptr<mxrun::TlsAcceptor>> acceptor =
        mxrun::MakeTlsAcceptor(tls, "mxrun-master --metrics_tls");
    if (!acceptor.ok()) {
      std::fprintf(stderr, "mxrun-master: error: %s\n",
                   std::string(acceptor.status().message()).c_str());
      return false;
    }
    http.tls = std::move(*acceptor);
  }
  absl::StatusOr<std::unique_ptr<mxrun::HttpServer>> started = mxrun::StartMetricsEndpoint(
      http, mxrun::MasterMetrics(snapshot), mxrun::MasterPages(snapshot, std::move(leader)));
  if (started.ok()) {
    out = std::move(*started);
    std::printf("mxrun-master metrics at %s/metrics\n", out->url().c_str());
    std::fflush(stdout);
    return true;
  }
  if (port_given) {
    std::fprintf(stderr, "mxrun-master: error: %s\n",
                 std::string(started.status().message()).c_str());
    return false;
  }
  // The default port is taken (another master on this host): serve on without.
  std::fprintf(stderr,
               "mxrun-master: warning: no metrics: %s (give --metrics_port=PORT, or 0 for "
               "a free one)\n",
               std::string(started.status().message()).c_str());
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  const mxrun::EnvMap env = mxrun::EnvFromStrings(environ);
  absl::StatusOr<mxrun::MasterFlagsResult> resolved = mxrun::ResolveMasterFlags(argc, argv, env);
  if (!resolved.ok()) {
    std::fprintf(stderr, "mxrun-master: error: %s\n",
                 std::string(resolved.status().message()).c_str());
    return 2;
  }
  if (!resolved->flags) {  // --help, --version, --print-config
    std::fputs(resolved->text.c_str(), stdout);
    return 0;
  }
  mxrun::MasterFlags& flags = *resolved->flags;
  mxrun::MasterServerOptions& options = flags.server;
  const std::string& host = options.host;
  const bool bind_all = options.bind_all;
  const mxrun::TlsFiles& tls = options.tls;
  const std::string& service = flags.service;
  absl::StatusOr<std::string> token = mxrun::ReadRendezvousToken(flags.token_file, env);
  if (!token.ok()) {
    std::fprintf(stderr, "mxrun-master: error: --token_file=%s: %s\n", flags.token_file.c_str(),
                 std::string(token.status().message()).c_str());
    return 2;
  }
  options.token = std::move(*token);
  // gRPC (and the metrics' TLS) serve the files as last verified, from memory.
  std::unique_ptr<mxrun::ServedTlsFiles> served_tls;
  if (options.tls.enabled()) {
    absl::StatusOr<std::unique_ptr<mxrun::ServedTlsFiles>> loaded =
        mxrun::ServedTlsFiles::Load(options.tls);
    if (!loaded.ok()) {
      std::fprintf(stderr, "mxrun-master: error: %s\n",
                   std::string(loaded.status().message()).c_str());
      return 2;
    }
    served_tls = std::move(*loaded);
    options.tls = served_tls->served();
  }
  std::optional<mxrun::EtcdElectionConfig>& election = flags.election;
  if (election) {
    election->identity = absl::StrCat("mxrun-master@", host, ":", getpid());
    election->master = options;
    if (bind_all) {
      // Published for the agents: an address of this machine, not 0.0.0.0.
      absl::StatusOr<mxrun::HostPort> member =
          mxrun::ParseHostPort(election->etcd.endpoints.front(), mxrun::kDefaultEtcdPort);
      absl::StatusOr<std::string> local =
          member.ok() ? mxrun::LocalAddressToward(member->host, member->port)
                      : absl::StatusOr<std::string>(member.status());
      election->master.advertise_host = local.ok() ? *local : host;
    }
  }
  const int metrics_port = flags.metrics_port;
  const bool metrics_port_given = flags.metrics_port_given;
  const bool metrics_tls = flags.metrics_tls;

  // Debian builds Abseil without NDEBUG, so every absl::Mutex that gRPC locks would feed a
  // deadlock-detection graph: 4% of the master's CPU at 16,384 sessions, for gRPC's own locks.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  // gRPC's own lines stay quiet, a failed TLS handshake excepted (rendezvous/grpc/grpc_logs.h).
  mxrun::RouteGrpcLogs(
      [](const std::string& line) { std::fprintf(stderr, "mxrun-master: %s\n", line.c_str()); },
      [](const std::string& line) {  // gRPC's errors, as gRPC itself would print them
        if (line.rfind("error: ", 0) == 0)
          std::fprintf(stderr, "mxrun-master: grpc %s\n", line.c_str());
      });
  // Block the stop signals (and SIGHUP: certificates) before gRPC starts its threads; wait for
  // them here.
  mxrun::HttpServer::Options metrics_http;
  metrics_http.host = host;
  metrics_http.bind_all = bind_all;
  metrics_http.port = metrics_port;
  metrics_http.who = "mxrun-master metrics";
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGHUP);
  sigprocmask(SIG_BLOCK, &stop, nullptr);
  mxrun::ServiceNotifier notifier =
      mxrun::ServiceNotifier::FromEnv(env, static_cast<long>(getpid()));
  if (election) {
    const std::string keys = election->keys.prefix;
    absl::StatusOr<std::unique_ptr<mxrun::EtcdMasterElection>> candidate =
        mxrun::EtcdMasterElection::Start(std::move(*election));
    if (!candidate.ok()) {
      std::fprintf(stderr, "mxrun-master: error: %s\n",
                   std::string(candidate.status().message()).c_str());
      return 2;
    }
    std::printf("mxrun-master candidate for service %s (etcd %s)\n", service.c_str(), keys.c_str());
    std::fflush(stdout);
    // Every replica serves its metrics: the leader its runs, the others that they stand by.
    std::unique_ptr<mxrun::HttpServer> metrics;
    mxrun::EtcdMasterElection* elected = candidate->get();
    if (!StartMasterMetrics(
            metrics_http, metrics_tls, metrics_port_given, tls,
            [elected] { return elected->SnapshotIfLeading(); },
            [elected] { return elected->Current(); }, metrics)) {
      (*candidate)->Shutdown(std::chrono::seconds(2));
      return 2;
    }
    notifier.Ready("candidate for service " + service);
    int signo = 0;
    while (sigwait(&stop, &signo) == 0 && signo == SIGHUP) ReloadCertificates(served_tls.get());
    notifier.Stopping("stopping on signal " + std::to_string(signo));
    std::fprintf(stderr, "mxrun-master: stopping on signal %d\n", signo);
    metrics.reset();
    (*candidate)->Shutdown(std::chrono::seconds(2));
    return 0;
  }
  if (std::optional<std::string> open_door = mxrun::OpenDoorWarning(
          options, "--token_file FILE (agents: --rdzv_conf token_file=FILE)",
          "--cert, --key and --cacert (agents: --rdzv_conf cert=,key=,cacert=)")) {
    std::fprintf(stderr, "mxrun-master: warning: %s\n", open_door->c_str());
  }
  absl::StatusOr<std::unique_ptr<mxrun::MasterServer>> server = mxrun::MasterServer::Start(options);
  if (!server.ok()) {
    std::fprintf(stderr, "mxrun-master: error: %s\n",
                 std::string(server.status().message()).c_str());
    return 3;
  }
  std::printf("mxrun-master listening on %s%s%s\n", (*server)->address().c_str(),
              options.token.empty() ? "" : " (token required)",
              tls.enabled() ? " (mutual TLS)" : "");
  std::fflush(stdout);
  std::unique_ptr<mxrun::HttpServer> metrics;
  mxrun::MasterServer* served = server->get();
  if (!StartMasterMetrics(
          metrics_http, metrics_tls, metrics_port_given, tls,
          [served] { return std::optional(served->Snapshot()); }, [] { return std::string(); },
          metrics)) {
    (*server)->Shutdown(std::chrono::seconds(2));
    return 2;
  }
  // As a systemd Type=notify service: ready once it serves.
  notifier.Ready("listening on " + (*server)->address());
  int signo = 0;
  while (sigwait(&stop, &signo) == 0 && signo == SIGHUP) ReloadCertificates(served_tls.get());
  notifier.Stopping("stopping on signal " + std::to_string(signo));
  std::fprintf(stderr, "mxrun-master: stopping on signal %d\n", signo);
  metrics.reset();
  (*server)->Shutdown(std::chrono::seconds(2));
  return 0;
}
