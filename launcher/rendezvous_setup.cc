#include "launcher/rendezvous_setup.h"

#include <cmath>
#include <map>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "agent/store/workers_store_rendezvous.h"
#include "launcher/token.h"
#include "rendezvous/local_rendezvous.h"
#include "rendezvous/net.h"

namespace mxrun {
namespace {

constexpr const char* kAcceptedKeys =
    "join_timeout, last_call_timeout, close_timeout, heartbeat_interval, keep_alive_interval, "
    "missed_heartbeats, keep_alive_max_attempt, is_host, bind_all, token_file, cert, key, cacert "
    "(mutual TLS with the master; with --rdzv_backend=etcd: with etcd); with --rdzv_backend=etcd "
    "also protocol, lease_ttl, etcd_prefix, master_service, master_cert, master_key, "
    "master_cacert (mutual TLS with the elected master)";

absl::StatusOr<std::chrono::milliseconds> Duration(const std::string& key,
                                                   const std::string& value) {
  double seconds = 0;
  if (!absl::SimpleAtod(value, &seconds) || !std::isfinite(seconds) || seconds <= 0 ||
      seconds > 1e6) {
    return absl::InvalidArgumentError(
        absl::StrCat("--rdzv_conf ", key, "=", value, " is not valid; accepted: seconds > 0"));
  }
  return std::chrono::milliseconds(static_cast<long>(std::llround(seconds * 1000.0)));
}

absl::StatusOr<bool> Bool(const std::string& key, const std::string& value) {
  std::string v = absl::AsciiStrToLower(value);
  if (v == "1" || v == "true" || v == "yes") return true;
  if (v == "0" || v == "false" || v == "no") return false;
  return absl::InvalidArgumentError(
      absl::StrCat("--rdzv_conf ", key, "=", value, " is not valid; accepted: 1/0, true/false"));
}

// The flag combinations a multi-node job cannot run with.
absl::Status CheckNetworkFlags(const LaunchOptions& options) {
  if (options.rdzv_backend == "static") {
    if (options.nnodes.min != options.nnodes.max) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--nnodes=", options.nnodes.min, ":", options.nnodes.max,
          " needs a dynamic rendezvous (--rdzv_backend=c10d --rdzv_endpoint=HOST:PORT); the "
          "static rendezvous takes a fixed --nnodes=N with --node_rank"));
    }
    if (options.node_rank >= options.nnodes.max) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--node_rank=", options.node_rank, " is not valid with --nnodes=", options.nnodes.max,
          "; accepted: 0 to ", options.nnodes.max - 1));
    }
    return absl::OkStatus();
  }
  if (options.rdzv_endpoint.empty()) {
    return absl::InvalidArgumentError(
        options.rdzv_backend == "etcd"
            ? "--rdzv_backend=etcd needs --rdzv_endpoint=HOST:PORT[,HOST:PORT...] (the etcd "
              "members' client addresses, the same on every node)"
            : "--rdzv_backend=c10d needs --rdzv_endpoint=HOST[:PORT] (the master's address, the "
              "same on every node)");
  }
  if (options.rdzv_backend != "etcd") {
    if (absl::StatusOr<HostPort> endpoint = RendezvousEndpoint(options); !endpoint.ok()) {
      return endpoint.status();
    }
  }
  // A missing --rdzv_id is torchrun's "none" (one-node launches often leave it out): jobs that
  // share a master and say nothing are one run, as with torchrun.
  if (options.rdzv_id.empty()) {
    return absl::InvalidArgumentError(
        "--rdzv_id is empty: give every node of the job the same id (for example the "
        "scheduler's job id), or leave the flag out for torchrun's default 'none'");
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<HostPort> RendezvousEndpoint(const LaunchOptions& options) {
  absl::StatusOr<HostPort> endpoint = ParseHostPort(options.rdzv_endpoint, kDefaultRendezvousPort);
  if (!endpoint.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--rdzv_endpoint: ", endpoint.status().message()));
  }
  return endpoint;
}

absl::StatusOr<RendezvousSettings> CheckRendezvousFlags(const LaunchOptions& options,
                                                        const EnvMap& env) {
  if (options.nnodes.max == 1 && options.node_rank != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--node_rank=", options.node_rank,
                     " is not valid with one node: the only node has rank 0"));
  }
  if (NeedsNetwork(options)) {
    if (absl::Status status = CheckNetworkFlags(options); !status.ok()) return status;
  }
  RendezvousSettings s;
  std::string token_file;
  std::map<std::string, std::string> etcd_tls;
  for (const auto& [key, value] : options.rdzv_conf) {
    if (key == "join_timeout" || key == "last_call_timeout" || key == "heartbeat_interval" ||
        key == "keep_alive_interval" || key == "close_timeout") {
      absl::StatusOr<std::chrono::milliseconds> d = Duration(key, value);
      if (!d.ok()) return d.status();
      if (key == "join_timeout") s.timeouts.join_timeout = *d;
      if (key == "last_call_timeout") s.timeouts.last_call_timeout = *d;
      if (key == "heartbeat_interval" || key == "keep_alive_interval") {
        s.timeouts.heartbeat_interval = *d;
      }
    } else if (key == "missed_heartbeats" || key == "keep_alive_max_attempt") {
      int n = 0;
      if (!absl::SimpleAtoi(value, &n) || n < 1 || n > 1000) {
        return absl::InvalidArgumentError(
            absl::StrCat("--rdzv_conf ", key, "=", value, " is not valid; accepted: 1 to 1000"));
      }
      s.timeouts.missed_heartbeats = n;
    } else if (key == "is_host" || key == "bind_all") {
      absl::StatusOr<bool> b = Bool(key, value);
      if (!b.ok()) return b.status();
      if (key == "is_host") s.is_host = *b ? 1 : 0;
      if (key == "bind_all") s.bind_all = *b;
    } else if (key == "token_file") {
      token_file = value;
    } else if (options.rdzv_backend == "etcd" &&
               (key == "protocol" || key == "cacert" || key == "cert" || key == "key")) {
      etcd_tls[key] = value;
    } else if (options.rdzv_backend != "etcd" &&
               (key == "cacert" || key == "cert" || key == "key")) {
      (key == "cert" ? s.tls.cert : key == "key" ? s.tls.key : s.tls.cacert) = value;
    } else if (key == "master_cert" || key == "master_key" || key == "master_cacert") {
      // With etcd, cert/key/cacert are etcd's (torchrun's meaning): the master's are apart, since
      // the two may well come from different CAs.
      if (options.rdzv_backend != "etcd") {
        return absl::InvalidArgumentError(absl::StrCat(
            "--rdzv_conf ", key, " is for --rdzv_backend=etcd (the elected master's TLS); with ",
            options.rdzv_backend, " give the master's TLS as cert, key and cacert"));
      }
      (key == "master_cert" ? s.tls.cert : key == "master_key" ? s.tls.key : s.tls.cacert) = value;
    } else if (options.rdzv_backend == "etcd" && key == "lease_ttl") {
      int ttl = 0;
      if (!absl::SimpleAtoi(value, &ttl) || ttl < 1 || ttl > 3600) {
        return absl::InvalidArgumentError(
            absl::StrCat("--rdzv_conf lease_ttl=", value,
                         " is not valid; accepted: whole seconds, 1 to 3600 "
                         "(default ",
                         kDefaultEtcdLeaseTtl.count(), ")"));
      }
      s.lease_ttl = std::chrono::seconds(ttl);
    } else if (options.rdzv_backend == "etcd" && key == "etcd_prefix") {
      if (absl::Status valid = ValidateEtcdPrefix(value); !valid.ok()) {
        return absl::InvalidArgumentError(absl::StrCat("--rdzv_conf ", valid.message()));
      }
      s.etcd_prefix = value;
    } else if (options.rdzv_backend == "etcd" && key == "master_service") {
      if (absl::Status valid = ValidateServiceName(value); !valid.ok()) {
        return absl::InvalidArgumentError(absl::StrCat("--rdzv_conf ", valid.message()));
      }
      s.master_service = value;
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("--rdzv_conf key '", key, "' is not known; accepted: ", kAcceptedKeys));
    }
  }
  if (options.rdzv_backend == "etcd" && NeedsNetwork(options)) {
    absl::StatusOr<EtcdConfig> etcd =
        ParseEtcdConfig(options.rdzv_endpoint, etcd_tls["protocol"], etcd_tls["cacert"],
                        etcd_tls["cert"], etcd_tls["key"]);
    if (!etcd.ok()) return etcd.status();
    s.etcd = std::move(*etcd);
    if (s.is_host == 1 && !s.master_service.empty()) {
      return absl::InvalidArgumentError(
          "--rdzv_conf is_host=1 and master_service go not together: with master_service the "
          "mxrun-master replicas of that service host the master");
    }
  }
  if (absl::Status tls = CheckTlsFiles(
          s.tls, options.rdzv_backend == "etcd" ? "--rdzv_conf master_cert/master_key/master_cacert"
                                                : "--rdzv_conf");
      !tls.ok()) {
    return tls;
  }
  absl::StatusOr<std::string> token = ReadRendezvousToken(token_file, env);
  if (!token.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--rdzv_conf token_file=", token_file, ": ", token.status().message()));
  }
  s.token = std::move(*token);
  return s;
}

absl::StatusOr<NodeRendezvous> SetUpLocalRendezvous(const LaunchOptions& options,
                                                    int local_world_size,
                                                    const std::string& standalone_run_id) {
  // One node needs no network: the round is this node, the budget is counted here.
  LocalRendezvousConfig local;
  local.local_world_size = local_world_size;
  local.max_restarts = options.max_restarts;
  local.stragglers = options.agent.stragglers;  // judged here, as a master judges a whole job
  if (RunsStandalone(options)) {
    local.run_id = standalone_run_id;
    local.master_addr = "localhost";
    local.master_port = 0;  // a free port per round: two jobs on one host never collide
  } else {
    local.run_id = options.rdzv_id;
    local.master_addr = options.master_addr;
    local.master_port = options.master_port;
  }
  NodeRendezvous result;
  result.description = "single node";
  result.rendezvous = std::make_unique<LocalRendezvous>(local);
  if (options.agent_store) {
    // The workers' store in this agent, listening before any rank starts (--workers_store).
    WorkersStoreConfig store;
    store.host = local.master_addr;
    store.fixed_port = local.master_port;
    HostWorkersStore(result, std::move(store));
  }
  return result;
}

void HostWorkersStore(NodeRendezvous& node, WorkersStoreConfig config) {
  absl::StrAppend(&node.description, config.from_rounds
                                         ? ", the workers' store in node rank 0's agent"
                                         : ", the workers' store in the agent");
  auto hosting =
      std::make_unique<WorkersStoreRendezvous>(std::move(node.rendezvous), std::move(config));
  WorkersStoreRendezvous* stores = hosting.get();  // lives as long as the rendezvous
  node.store_totals = [stores] { return stores->Totals(); };
  node.rendezvous = std::move(hosting);
}

bool NeedsNetwork(const LaunchOptions& options) {
  return !RunsStandalone(options) && (options.nnodes.max > 1 || !options.rdzv_endpoint.empty());
}

}  // namespace mxrun
