// mxrun-master: the rendezvous master on its own, for a head node (a systemd service) that outlives
// any training node. Prints "mxrun-master listening on HOST:PORT" once it serves.
//
//   mxrun-master [--host=ADDR] [--port=29400] [--bind_all] [--token_file=PATH] [--state_dir=DIR]
//                [--cert=PEM --key=PEM --cacert=PEM]   (mutual TLS; SIGHUP checks replaced files)
//                [--metrics_port=29401|0|off] [--metrics_tls]   (Prometheus metrics at /metrics;
//                 the port also as MXRUN_MASTER_METRICS_PORT)
//   mxrun-master --rdzv_backend=etcd --rdzv_endpoint=ETCD[,ETCD...] [--service=NAME]
//                [--rdzv_conf=protocol=https,cacert=...,cert=...,key=...,lease_ttl=2,etcd_prefix=/mxrun]
//                [--host=ADDR] [--port=0] [--bind_all] [--token_file=PATH]
//                [--cert=PEM --key=PEM --cacert=PEM]   (mutual TLS with the agents, apart from etcd's)
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

#include "CLI/CLI.hpp"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "common/env_contract.h"
#include "common/http_tls.h"
#include "common/metrics_endpoint.h"
#include "common/service_notify.h"
#include "common/tls_files.h"
#include "launcher/token.h"
#include "rendezvous/etcd_leadership.h"
#include "rendezvous/grpc_logs.h"
#include "rendezvous/master_metrics.h"
#include "rendezvous/master_server.h"
#include "rendezvous/status_page.h"
#include "rendezvous/net.h"
#include "rendezvous/tls_credentials.h"

extern char** environ;

namespace {

// --rdzv_conf for an etcd replica: protocol, cacert, cert, key, lease_ttl, etcd_prefix.
absl::StatusOr<mxrun::EtcdElectionConfig> EtcdSettings(const std::string& endpoints,
                                                       const std::string& conf,
                                                       const std::string& service) {
  std::map<std::string, std::string> kv;
  for (absl::string_view item : absl::StrSplit(conf, ',', absl::SkipWhitespace())) {
    std::pair<std::string, std::string> pair = absl::StrSplit(item, absl::MaxSplits('=', 1));
    const std::string key(absl::StripAsciiWhitespace(pair.first));
    if (key != "protocol" && key != "cacert" && key != "cert" && key != "key" &&
        key != "lease_ttl" && key != "etcd_prefix") {
      return absl::InvalidArgumentError(absl::StrCat(
          "--rdzv_conf key '", key,
          "' is not known; accepted: protocol, cacert, cert, key, lease_ttl, etcd_prefix"));
    }
    kv[key] = std::string(absl::StripAsciiWhitespace(pair.second));
  }
  mxrun::EtcdElectionConfig config;
  absl::StatusOr<mxrun::EtcdConfig> etcd =
      mxrun::ParseEtcdConfig(endpoints, kv["protocol"], kv["cacert"], kv["cert"], kv["key"]);
  if (!etcd.ok()) return etcd.status();
  config.etcd = std::move(*etcd);
  if (kv.count("lease_ttl")) {
    int ttl = 0;
    if (!absl::SimpleAtoi(kv["lease_ttl"], &ttl) || ttl < 1 || ttl > 3600) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--rdzv_conf lease_ttl=", kv["lease_ttl"], " is not valid; accepted: 1 to 3600 s"));
    }
    config.lease_ttl = std::chrono::seconds(ttl);
  }
  std::string prefix = kv.count("etcd_prefix") ? kv["etcd_prefix"] : mxrun::kDefaultEtcdPrefix;
  if (absl::Status valid = mxrun::ValidateEtcdPrefix(prefix); !valid.ok()) return valid;
  if (absl::Status valid = mxrun::ValidateServiceName(service); !valid.ok()) return valid;
  config.keys = mxrun::EtcdKeysForService(prefix, service);
  return config;
}

// SIGHUP: gRPC re-reads the certificate files by itself (tls_credentials.h); this says at once
// whether what is on disk now is usable, instead of leaving a broken file to fail the next
// handshakes silently.
void ReportCertificates(const mxrun::TlsFiles& tls) {
  if (!tls.enabled()) {
    std::fprintf(stderr, "mxrun-master: SIGHUP: no certificates to re-read (plaintext)\n");
  } else if (absl::Status checked = mxrun::CheckTlsFiles(tls, "mxrun-master"); !checked.ok()) {
    std::fprintf(stderr, "mxrun-master: SIGHUP: %s; sessions go on, new handshakes fail until "
                 "the files are fixed\n", std::string(checked.message()).c_str());
  } else {
    std::fprintf(stderr, "mxrun-master: SIGHUP: certificate files re-read; new connections "
                 "use them within %u s, established sessions go on\n",
                 mxrun::kTlsRefreshSeconds);
  }
}

// Serves the metrics and the status page on `base` (when its port is not negative) from
// `snapshot`: the runs, or nullopt for an etcd-elected replica that does not lead now (`leader`
// then says where the one that leads serves). False once an error is printed: a given port that
// cannot be served, or TLS that cannot be set up. The default port taken only warns.
bool StartMasterMetrics(const mxrun::HttpServer::Options& base, bool metrics_tls,
                        bool port_given, const mxrun::TlsFiles& tls,
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
  std::map<std::string, mxrun::HttpServer::Handler> pages;
  pages["/"] = [snapshot, leader](const mxrun::HttpRequest&) {
    const std::optional<std::vector<mxrun::RunSnapshot>> runs = snapshot();
    return mxrun::HttpResponse{
        200, "text/html; charset=utf-8",
        runs ? mxrun::RenderStatusPage(*runs, std::chrono::steady_clock::now())
             : mxrun::RenderStandbyPage(leader())};
  };
  absl::StatusOr<std::unique_ptr<mxrun::HttpServer>> started = mxrun::StartMetricsEndpoint(
      http,
      [snapshot](mxrun::ExpositionFormat format) {
        const std::optional<std::vector<mxrun::RunSnapshot>> runs = snapshot();
        return mxrun::RenderMasterMetrics(runs.value_or(std::vector<mxrun::RunSnapshot>{}),
                                          format, runs.has_value());
      },
      std::move(pages));
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
  std::fprintf(stderr, "mxrun-master: warning: no metrics: %s (give --metrics_port=PORT, or 0 for "
               "a free one)\n", std::string(started.status().message()).c_str());
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"mxrun-master: the mxrun rendezvous master (many runs, keyed by run id)",
               "mxrun-master"};
  std::string host = "127.0.0.1";
  int port = mxrun::kDefaultRendezvousPort;
  bool bind_all = false;
  std::string token_file;
  std::string state_dir;
  std::string backend = "none";
  std::string etcd_endpoints;
  std::string rdzv_conf;
  std::string service = "default";
  mxrun::TlsFiles tls;
  app.add_option("--host", host, "address to listen on (default 127.0.0.1)");
  app.add_option("--cert", tls.cert,
                 "mutual TLS: this master's certificate (PEM; with --key and --cacert every agent "
                 "and mxrun status must present a certificate from --cacert's CA)");
  app.add_option("--key", tls.key, "mutual TLS: the private key of --cert (PEM)");
  app.add_option("--cacert", tls.cacert, "mutual TLS: the CA of the job's certificates (PEM)");
  app.add_option("--port", port,
                 "port (0: any free port; default " + std::to_string(port) + ")")
      ->check(CLI::Range(0, 65535));
  app.add_flag("--bind_all,--bind-all", bind_all, "listen on every interface");
  app.add_option("--token_file,--token-file", token_file,
                 "file holding the shared token every agent must present");
  app.add_option("--state_dir,--state-dir", state_dir,
                 "keep the running jobs' rendezvous state here, so that after a crash and restart "
                 "the agents reconnect and running workers carry on");
  app.add_option("--rdzv_backend,--rdzv-backend", backend,
                 "etcd (or etcd-v2): be one replica of a master service elected in etcd");
  app.add_option("--rdzv_endpoint,--rdzv-endpoint", etcd_endpoints,
                 "with etcd: the members, HOST:PORT[,HOST:PORT...]");
  app.add_option("--rdzv_conf,--rdzv-conf", rdzv_conf,
                 "with etcd: protocol, cacert, cert, key, lease_ttl, etcd_prefix (KEY=VALUE,...)");
  std::string metrics_port_text;
  bool metrics_tls = false;
  app.add_option("--metrics_port,--metrics-port", metrics_port_text,
                 "serve Prometheus metrics and the status page on this port (default " +
                     std::to_string(mxrun::kDefaultMasterMetricsPort) +
                     ", or a free one with --port=0; 0: a free one; off: none)")
      ->envname("MXRUN_MASTER_METRICS_PORT");
  app.add_flag("--metrics_tls,--metrics-tls", metrics_tls,
               "serve the metrics over HTTPS with --cert, --key and --cacert (scrapers must "
               "present a certificate from the CA)");
  app.add_option("--service", service,
                 "with etcd: the master service this replica stands for (default \"default\"); "
                 "agents follow it with --rdzv_conf=master_service=NAME");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    std::fputs(app.help().c_str(), stdout);
    return 0;
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "mxrun-master: error: %s\n", e.what());
    return 2;
  }

  mxrun::MasterServerOptions options;
  options.host = host;
  options.port = port;
  options.bind_all = bind_all;
  options.state_dir = state_dir;
  if (absl::Status checked = mxrun::CheckTlsFiles(tls, "mxrun-master"); !checked.ok()) {
    std::fprintf(stderr, "mxrun-master: error: %s\n", std::string(checked.message()).c_str());
    return 2;
  }
  options.tls = tls;
  const mxrun::EnvMap env = mxrun::EnvFromStrings(environ);
  absl::StatusOr<std::string> token = mxrun::ReadRendezvousToken(token_file, env);
  if (!token.ok()) {
    std::fprintf(stderr, "mxrun-master: error: --token_file=%s: %s\n", token_file.c_str(),
                 std::string(token.status().message()).c_str());
    return 2;
  }
  options.token = std::move(*token);
  // The metrics port: given, or the default (a free one when the rendezvous port is the kernel's
  // pick, so that ephemeral masters never contend for one port).
  int metrics_port = port == 0 ? 0 : mxrun::kDefaultMasterMetricsPort;
  const bool metrics_port_given = !metrics_port_text.empty();
  if (metrics_port_text == "off") {
    metrics_port = -1;
  } else if (metrics_port_given && (!absl::SimpleAtoi(metrics_port_text, &metrics_port) ||
                                    metrics_port < 0 || metrics_port > 65535)) {
    std::fprintf(stderr, "mxrun-master: error: --metrics_port=%s (or MXRUN_MASTER_METRICS_PORT) is "
                 "not valid; accepted: a port from 1 to 65535, 0 for a free one, or off\n",
                 metrics_port_text.c_str());
    return 2;
  }
  if (metrics_tls && (!tls.enabled() || metrics_port < 0)) {
    std::fprintf(stderr, "mxrun-master: error: --metrics_tls needs --cert, --key and --cacert "
                 "and a metrics port\n");
    return 2;
  }
  const bool etcd = backend == "etcd" || backend == "etcd-v2";
  std::optional<mxrun::EtcdElectionConfig> election;
  if (etcd) {
    absl::StatusOr<mxrun::EtcdElectionConfig> config =
        EtcdSettings(etcd_endpoints, rdzv_conf, service);
    if (!state_dir.empty()) {
      config = absl::InvalidArgumentError("--state_dir and --rdzv_backend=etcd go not together: "
                                          "with etcd the state is kept in etcd");
    }
    if (!config.ok()) {
      std::fprintf(stderr, "mxrun-master: error: %s\n",
                   std::string(config.status().message()).c_str());
      return 2;
    }
    if (app.count("--port") == 0) {
      options.port = 0;  // replicas on one machine must not collide: not on metrics ports either
      if (!metrics_port_given && metrics_port > 0) metrics_port = 0;
    }
    config->identity = absl::StrCat("mxrun-master@", host, ":", getpid());
    config->master = options;
    if (bind_all) {
      // Published for the agents: an address of this machine, not 0.0.0.0.
      absl::StatusOr<mxrun::HostPort> member =
          mxrun::ParseHostPort(config->etcd.endpoints.front(), mxrun::kDefaultEtcdPort);
      absl::StatusOr<std::string> local =
          member.ok() ? mxrun::LocalAddressToward(member->host, member->port)
                      : absl::StatusOr<std::string>(member.status());
      config->master.advertise_host = local.ok() ? *local : host;
    }
    election = std::move(*config);
  } else if (backend != "none") {
    std::fprintf(stderr, "mxrun-master: error: --rdzv_backend=%s is not valid; accepted: etcd, "
                 "etcd-v2 (or leave it out for a single master)\n", backend.c_str());
    return 2;
  } else if (!etcd_endpoints.empty() || !rdzv_conf.empty()) {
    std::fprintf(stderr, "mxrun-master: error: --rdzv_endpoint and --rdzv_conf need "
                 "--rdzv_backend=etcd\n");
    return 2;
  }

  // Debian builds Abseil without NDEBUG, so every absl::Mutex that gRPC locks would feed a
  // deadlock-detection graph: 4% of the master's CPU at 16,384 sessions, for gRPC's own locks.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  // gRPC's own lines stay quiet, a failed TLS handshake excepted (rendezvous/grpc_logs.h).
  mxrun::RouteGrpcLogs(
      [](const std::string& line) { std::fprintf(stderr, "mxrun-master: %s\n", line.c_str()); },
      [](const std::string& line) {  // gRPC's errors, as gRPC itself would print them
        if (line.rfind("error: ", 0) == 0) std::fprintf(stderr, "mxrun-master: grpc %s\n", line.c_str());
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
  mxrun::ServiceNotifier notifier = mxrun::ServiceNotifier::FromEnv(env, static_cast<long>(getpid()));
  if (election) {
    const std::string keys = election->keys.prefix;
    absl::StatusOr<std::unique_ptr<mxrun::EtcdMasterElection>> candidate =
        mxrun::EtcdMasterElection::Start(std::move(*election));
    if (!candidate.ok()) {
      std::fprintf(stderr, "mxrun-master: error: %s\n",
                   std::string(candidate.status().message()).c_str());
      return 2;
    }
    std::printf("mxrun-master candidate for service %s (etcd %s)\n", service.c_str(),
                keys.c_str());
    std::fflush(stdout);
    // Every replica serves its metrics: the leader its runs, the others that they stand by.
    std::unique_ptr<mxrun::HttpServer> metrics;
    mxrun::EtcdMasterElection* elected = candidate->get();
    if (!StartMasterMetrics(metrics_http, metrics_tls, metrics_port_given, tls,
                            [elected] { return elected->SnapshotIfLeading(); },
                            [elected] { return elected->Current(); }, metrics)) {
      (*candidate)->Shutdown(std::chrono::seconds(2));
      return 2;
    }
    notifier.Ready("candidate for service " + service);
    int signo = 0;
    while (sigwait(&stop, &signo) == 0 && signo == SIGHUP) ReportCertificates(tls);
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
    std::fprintf(stderr, "mxrun-master: error: %s\n", std::string(server.status().message()).c_str());
    return 3;
  }
  std::printf("mxrun-master listening on %s%s%s\n", (*server)->address().c_str(),
              options.token.empty() ? "" : " (token required)",
              tls.enabled() ? " (mutual TLS)" : "");
  std::fflush(stdout);
  std::unique_ptr<mxrun::HttpServer> metrics;
  mxrun::MasterServer* served = server->get();
  if (!StartMasterMetrics(metrics_http, metrics_tls, metrics_port_given, tls,
                          [served] { return std::optional(served->Snapshot()); },
                          [] { return std::string(); }, metrics)) {
    (*server)->Shutdown(std::chrono::seconds(2));
    return 2;
  }
  // As a systemd Type=notify service: ready once it serves.
  notifier.Ready("listening on " + (*server)->address());
  int signo = 0;
  while (sigwait(&stop, &signo) == 0 && signo == SIGHUP) ReportCertificates(tls);
  notifier.Stopping("stopping on signal " + std::to_string(signo));
  std::fprintf(stderr, "mxrun-master: stopping on signal %d\n", signo);
  metrics.reset();
  (*server)->Shutdown(std::chrono::seconds(2));
  return 0;
}
