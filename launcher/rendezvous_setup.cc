#include "launcher/rendezvous_setup.h"

#include <cmath>
#include <fstream>
#include <sstream>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "rendezvous/grpc_rendezvous.h"
#include "rendezvous/local_rendezvous.h"
#include "rendezvous/master_server.h"
#include "rendezvous/net.h"

namespace mxrun {
namespace {

constexpr int kDefaultRdzvPort = 29400;
constexpr const char* kAcceptedKeys =
    "join_timeout, last_call_timeout, close_timeout, heartbeat_interval, keep_alive_interval, "
    "missed_heartbeats, keep_alive_max_attempt, is_host, bind_all, token_file";

absl::StatusOr<std::chrono::milliseconds> Duration(const std::string& key,
                                                   const std::string& value) {
  double seconds = 0;
  if (!absl::SimpleAtod(value, &seconds) || !std::isfinite(seconds) || seconds <= 0 ||
      seconds > 1e6) {
    return absl::InvalidArgumentError(absl::StrCat("--rdzv_conf ", key, "=", value,
                                                   " is not valid; accepted: seconds > 0"));
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

}  // namespace

absl::StatusOr<RendezvousSettings> ParseRendezvousSettings(const LaunchOptions& options,
                                                           const EnvMap& env) {
  RendezvousSettings s;
  std::string token_file;
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
        return absl::InvalidArgumentError(absl::StrCat("--rdzv_conf ", key, "=", value,
                                                       " is not valid; accepted: 1 to 1000"));
      }
      s.timeouts.missed_heartbeats = n;
    } else if (key == "is_host" || key == "bind_all") {
      absl::StatusOr<bool> b = Bool(key, value);
      if (!b.ok()) return b.status();
      if (key == "is_host") s.is_host = *b ? 1 : 0;
      if (key == "bind_all") s.bind_all = *b;
    } else if (key == "token_file") {
      token_file = value;
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("--rdzv_conf key '", key, "' is not known; accepted: ", kAcceptedKeys));
    }
  }
  if (!token_file.empty()) {
    std::ifstream in(token_file);
    if (!in) {
      return absl::InvalidArgumentError(
          absl::StrCat("--rdzv_conf token_file=", token_file, ": cannot be read"));
    }
    std::stringstream text;
    text << in.rdbuf();
    s.token = std::string(absl::StripAsciiWhitespace(text.str()));
    if (s.token.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--rdzv_conf token_file=", token_file, ": the file is empty"));
    }
  } else if (auto it = env.find("MXRUN_RDZV_TOKEN"); it != env.end()) {
    s.token = std::string(absl::StripAsciiWhitespace(it->second));
  }
  return s;
}

absl::StatusOr<NodeRendezvous> SetUpRendezvous(const LaunchOptions& options,
                                               const RendezvousSettings& settings,
                                               int local_world_size, const std::string& host_name,
                                               const std::string& standalone_run_id) {
  NodeRendezvous result;
  const bool single_node = options.nnodes.max == 1;
  if (options.standalone || (single_node && options.rdzv_endpoint.empty())) {
    // One node needs no network: the round is this node, the budget is counted here.
    LocalRendezvousConfig local;
    local.local_world_size = local_world_size;
    local.max_restarts = options.max_restarts;
    if (options.standalone) {
      local.run_id = standalone_run_id;
      local.master_addr = "localhost";
      local.master_port = 0;  // a free port per round: two jobs on one host never collide
    } else {
      local.run_id = options.rdzv_id;
      local.master_addr = options.master_addr;
      local.master_port = options.master_port;
    }
    result.run_id = local.run_id;
    result.description = "single node";
    result.rendezvous = std::make_unique<LocalRendezvous>(local);
    return result;
  }

  GrpcRendezvousConfig config;
  config.run_id = options.rdzv_id;
  config.token = settings.token;
  config.job.min_nodes = options.nnodes.min;
  config.job.max_nodes = options.nnodes.max;
  config.job.max_restarts = options.max_restarts;
  config.job.timeouts = settings.timeouts;
  config.node.host = host_name;
  config.node.address = options.local_addr;
  config.node.local_world_size = local_world_size;
  config.node.requested_rank = -1;

  MasterServerOptions master;
  master.bind_all = settings.bind_all;
  master.token = settings.token;
  bool host_master = false;
  if (options.rdzv_backend == "static") {
    if (options.nnodes.min != options.nnodes.max) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--nnodes=", options.nnodes.min, ":", options.nnodes.max,
          " needs a dynamic rendezvous (--rdzv_backend=c10d --rdzv_endpoint=HOST:PORT); the "
          "static rendezvous takes a fixed --nnodes=N with --node_rank"));
    }
    if (options.node_rank >= options.nnodes.max) {
      return absl::InvalidArgumentError(absl::StrCat("--node_rank=", options.node_rank,
                                                     " is not valid with --nnodes=",
                                                     options.nnodes.max, "; accepted: 0 to ",
                                                     options.nnodes.max - 1));
    }
    config.node.requested_rank = options.node_rank;
    config.endpoint = JoinHostPort(options.master_addr, options.master_port);
    master.host = options.master_addr;
    master.port = options.master_port;
    host_master = options.node_rank == 0;
  } else {
    if (options.rdzv_endpoint.empty()) {
      return absl::InvalidArgumentError(
          "--rdzv_backend=c10d needs --rdzv_endpoint=HOST[:PORT] (the master's address, the same "
          "on every node)");
    }
    absl::StatusOr<HostPort> endpoint = ParseHostPort(options.rdzv_endpoint, kDefaultRdzvPort);
    if (!endpoint.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("--rdzv_endpoint: ",
                                                     endpoint.status().message()));
    }
    if (options.node_rank_given) config.node.requested_rank = options.node_rank;
    config.endpoint = JoinHostPort(endpoint->host, endpoint->port);
    master.host = endpoint->host;
    master.port = endpoint->port;
    host_master = settings.is_host == 1 ||
                  (settings.is_host == -1 && IsLocalHost(endpoint->host) &&
                   !PortInUse(endpoint->host, endpoint->port));
  }
  if (options.rdzv_id.empty() || options.rdzv_id == "none") {
    if (options.rdzv_backend != "static") {
      return absl::InvalidArgumentError(
          "--rdzv_id is required with a dynamic rendezvous: give every node of the job the same "
          "id (for example the scheduler's job id)");
    }
  }

  if (host_master) {
    absl::StatusOr<std::unique_ptr<MasterServer>> server = MasterServer::Start(master);
    if (server.ok()) {
      result.master = std::move(*server);
      config.node.hosts_master = true;
    } else if (settings.is_host == 1 || options.rdzv_backend == "static") {
      return absl::UnavailableError(absl::StrCat("this node must host the rendezvous master but ",
                                                 server.status().message()));
    }
    // Dynamic mode: another agent on this machine hosts it already; join it as a client.
  }
  result.run_id = config.run_id;
  result.description = absl::StrCat(
      options.rdzv_backend == "static" ? "static" : "dynamic", " rendezvous at ", config.endpoint,
      result.master ? " (hosted here)" : "", ", run '", config.run_id, "', nodes ",
      options.nnodes.min, options.nnodes.min == options.nnodes.max
                              ? std::string()
                              : absl::StrCat(":", options.nnodes.max));
  result.rendezvous = std::make_unique<GrpcRendezvous>(std::move(config));
  return result;
}

}  // namespace mxrun
