#include "launcher/rendezvous_setup.h"

#include <grpc/support/log.h>

#include <cstdlib>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "launcher/launch_flags/slurm.h"
#include "rendezvous/client/grpc_rendezvous.h"
#include "rendezvous/client/master_probe.h"
#include "rendezvous/etcd/etcd_leadership.h"
#include "rendezvous/grpc/grpc_logs.h"
#include "rendezvous/master_server/master_server.h"
#include "rendezvous/net.h"
#include "spdlog/spdlog.h"

namespace mxrun {
namespace {

// How long a local listener on the rendezvous port has to answer as a master: a master on this
// host answers GetStatus in milliseconds; a stranger (a TCPStore, a web server) never does.
constexpr std::chrono::milliseconds kLocalMasterProbeTimeout{5000};

// gRPC's own log lines go to mxrun's log at debug level, so that an expected condition (losing the
// race to host the master: "Address already in use") does not print a scary error. Setting
// GRPC_VERBOSITY keeps gRPC's logger for debugging.
void RouteGrpcLogsToSpdlog() {
  RouteGrpcLogs([](const std::string& line) { spdlog::warn("{}", line); },
                [](const std::string& line) { spdlog::debug("grpc: {}", line); });
}

// The master this agent hosts listens beyond loopback with no token and no TLS: say so once.
void WarnIfOpen(const MasterServerOptions& master) {
  if (std::optional<std::string> open_door =
          OpenDoorWarning(master, "--rdzv_conf token_file=FILE on every node",
                          "--rdzv_conf cert=,key=,cacert= on every node")) {
    spdlog::warn("{}", *open_door);
  }
}

// --rdzv_backend=etcd: this agent is a candidate in the master's election (unless is_host=0 or
// the job follows an mxrun-master service) and follows whoever leads.
absl::StatusOr<NodeRendezvous> SetUpEtcdRendezvous(const LaunchOptions& options,
                                                   const RendezvousSettings& settings,
                                                   GrpcRendezvousConfig config) {
  const std::string& first_member = settings.etcd.endpoints.front();
  EtcdElectionConfig election;
  election.etcd = settings.etcd;
  election.keys = settings.master_service.empty()
                      ? EtcdKeysForRun(settings.etcd_prefix, options.rdzv_id)
                      : EtcdKeysForService(settings.etcd_prefix, settings.master_service);
  election.lease_ttl = settings.lease_ttl;
  election.candidate = settings.is_host != 0 && settings.master_service.empty();
  config.node.agent_id = NewAgentId();
  election.identity = config.node.agent_id;
  election.master.bind_all = settings.bind_all;
  election.master.token = settings.token;
  election.master.tls = settings.tls;  // master_cert/master_key/master_cacert, when hosted here
  // Elected per run: the master serves that run only (with master_service, mxrun-master replicas
  // serve many and agents never host).
  election.master.only_run_id = options.rdzv_id;
  election.master.port = 0;  // the kernel picks; the address is published in etcd
  election.master.host = options.local_addr;
  if (election.master.host.empty()) {
    absl::StatusOr<HostPort> member = ParseHostPort(first_member, kDefaultEtcdPort);
    if (!member.ok()) return member.status();
    absl::StatusOr<std::string> local = LocalAddressToward(member->host, member->port);
    if (!local.ok()) return local.status();
    election.master.host = *local;
  }
  election.master.advertise_host = election.master.host;  // also with bind_all
  const bool candidate = election.candidate;
  if (candidate) WarnIfOpen(election.master);
  election.log = [](const std::string& line) { spdlog::info("{}", line); };
  absl::StatusOr<std::unique_ptr<EtcdMasterElection>> started =
      EtcdMasterElection::Start(std::move(election));
  if (!started.ok()) return started.status();
  std::shared_ptr<EtcdMasterElection> elected(std::move(*started));

  NodeRendezvous result;
  result.before_exit = [elected] { elected->Shutdown(std::chrono::seconds(2)); };
  if (candidate) {
    result.elected_runs = [elected] { return elected->SnapshotIfLeading(); };
    result.elected_master = [elected] { return elected->Current(); };
  }
  result.description = absl::StrCat(
      "etcd rendezvous at ", absl::StrJoin(settings.etcd.endpoints, ","), " (master ",
      settings.master_service.empty()
          ? absl::StrCat(settings.is_host == 0 ? "elected among the other agents"
                                               : "elected among the agents, this one included")
          : absl::StrCat("of service '", settings.master_service, "'"),
      "), run '", config.run_id, "', nodes ", options.nnodes.min,
      options.nnodes.min == options.nnodes.max ? std::string()
                                               : absl::StrCat(":", options.nnodes.max));
  config.endpoint = absl::StrCat("etcd://", absl::StrJoin(settings.etcd.endpoints, ","));
  config.route_probe = first_member;
  config.locator = elected;
  result.rendezvous = std::make_unique<GrpcRendezvous>(std::move(config));
  return result;
}

// A Slurm job's default endpoint (slurm.h): the master is on the first free port of the job's
// block on the first node. The agent of node rank 0 there hosts it, unless a port of the block
// already serves this run (a second task of the job on that node: it joins, as any other node);
// every other agent finds it by asking each port which run it serves (master_probe.h).
absl::Status SetUpSlurmEndpoint(const LaunchOptions& options, const RendezvousSettings& settings,
                                const HostPort& endpoint, MasterServerOptions master,
                                NodeRendezvous& result, GrpcRendezvousConfig& config) {
  MasterProbeConfig probe;
  for (int i = 0; i < kSlurmRendezvousPortCandidates; ++i) {
    probe.candidates.push_back(JoinHostPort(endpoint.host, endpoint.port + i));
  }
  probe.run_id = options.rdzv_id;
  probe.token = settings.token;
  probe.tls = settings.tls;
  config.endpoint = absl::StrCat(probe.candidates.front(), " (or one of the ",
                                 kSlurmRendezvousPortCandidates - 1, " ports after it)");
  config.route_probe = probe.candidates.front();
  const bool may_host =
      settings.is_host == 1 ||
      (settings.is_host == -1 && options.node_rank == 0 && IsLocalHost(endpoint.host));
  std::vector<std::string> refusals;
  for (int i = 0; may_host && i < kSlurmRendezvousPortCandidates; ++i) {
    master.port = endpoint.port + i;
    absl::StatusOr<std::unique_ptr<MasterServer>> server = MasterServer::Start(master);
    if (server.ok()) {
      WarnIfOpen(master);
      result.master = std::shared_ptr<MasterServer>(std::move(*server));
      result.master_address = result.master->address();
      result.before_exit = [hosted = result.master] { hosted->Shutdown(std::chrono::seconds(2)); };
      config.node.hosts_master = true;
      config.endpoint = result.master_address;
      return absl::OkStatus();
    }
    absl::StatusOr<std::string> served =
        ServedRun(probe.candidates[i], probe.token, probe.tls, probe.probe_timeout);
    if (served.ok() && *served == options.rdzv_id) break;  // hosted by another task of this job
    refusals.push_back(absl::StrCat(master.port, " (", server.status().message(), ")"));
  }
  if (may_host && static_cast<int>(refusals.size()) == kSlurmRendezvousPortCandidates) {
    return absl::UnavailableError(absl::StrCat(
        "this node must host the rendezvous master of run '", options.rdzv_id, "' on ",
        endpoint.host, " but every port of the job's block is taken: ",
        absl::StrJoin(refusals, ", "), "; give --rdzv_endpoint=HOST:PORT with a free port"));
  }
  config.locator = std::make_shared<ProbingMasterLocator>(std::move(probe));
  return absl::OkStatus();
}

absl::StatusOr<NodeRendezvous> SetUpMasterRendezvous(const LaunchOptions& options,
                                                     const RendezvousSettings& settings,
                                                     int local_world_size,
                                                     const std::string& host_name) {
  NodeRendezvous result;
  GrpcRendezvousConfig config;
  config.run_id = options.rdzv_id;
  config.token = settings.token;
  config.tls = settings.tls;
  config.job.min_nodes = options.nnodes.min;
  config.job.max_nodes = options.nnodes.max;
  config.job.max_restarts = options.max_restarts;
  config.job.timeouts = settings.timeouts;
  config.job.stragglers = options.agent.stragglers;
  config.job.exclusion = options.exclusion;
  config.node.host = host_name;
  config.node.address = options.local_addr;
  config.node.local_world_size = local_world_size;
  config.node.requested_rank = -1;
  config.node.hosts_workers_store = options.agent_store;
  absl::StatusOr<std::string> topology =
      ResolveNodeTopology(options.rank_order, host_name, settings.nvlink_domain);
  if (!topology.ok()) return topology.status();
  config.node.topology = *topology;
  if (!topology->empty()) spdlog::info("this node's place in the network: {}", *topology);

  if (options.rdzv_backend == "etcd")
    return SetUpEtcdRendezvous(options, settings, std::move(config));

  MasterServerOptions master;
  master.bind_all = settings.bind_all;
  master.token = settings.token;
  master.tls = settings.tls;

  // A master this agent hosts ends with this job: no other run may come to depend on it.
  master.only_run_id = options.rdzv_id;
  bool host_master = false;
  if (options.rdzv_backend == "static") {
    config.node.requested_rank = options.node_rank;
    config.endpoint = JoinHostPort(options.master_addr, options.master_port);
    master.host = options.master_addr;
    master.port = options.master_port;
    host_master = options.node_rank == 0;
  } else {
    absl::StatusOr<HostPort> endpoint = RendezvousEndpoint(options);
    if (!endpoint.ok()) return endpoint.status();
    // The scheduler's node index gives way to the network's order when this node knows its
    // place; a --node_rank the user gave does not.
    const bool network_orders = !config.node.topology.empty() && options.node_rank_from_scheduler;
    if (options.node_rank_given && !network_orders) config.node.requested_rank = options.node_rank;
    if (options.rdzv_endpoint_from_slurm) {
      master.host = endpoint->host;
      if (absl::Status found =
              SetUpSlurmEndpoint(options, settings, *endpoint, master, result, config);
          !found.ok()) {
        return found;
      }
      result.description = absl::StrCat(
          "dynamic rendezvous at ", config.endpoint, result.master ? " (hosted here)" : "",
          ", run '", config.run_id, "', nodes ", options.nnodes.min,
          options.nnodes.min == options.nnodes.max ? std::string()
                                                   : absl::StrCat(":", options.nnodes.max));
      result.rendezvous = std::make_unique<GrpcRendezvous>(std::move(config));
      return result;
    }
    config.endpoint = JoinHostPort(endpoint->host, endpoint->port);
    master.host = endpoint->host;
    master.port = endpoint->port;
    const bool local = settings.is_host == -1 && IsLocalHost(endpoint->host);
    host_master =
        settings.is_host == 1 || (local && !PortListening(endpoint->host, endpoint->port));
    if (local && !host_master) {  // another agent's master, or a stranger on the port?
      if (absl::Status master_there = CheckListenerIsMaster(config.endpoint, settings.token,
                                                            settings.tls, kLocalMasterProbeTimeout);
          !master_there.ok()) {
        return master_there;
      }
    }
  }

  if (host_master) {
    absl::StatusOr<std::unique_ptr<MasterServer>> server = MasterServer::Start(master);
    if (server.ok()) {
      WarnIfOpen(master);
      result.master = std::shared_ptr<MasterServer>(std::move(*server));
      result.master_address = result.master->address();
      // Port 0 (torchrun's "localhost:0" for one node): the kernel chose one; join it there.
      if (master.port == 0) config.endpoint = result.master_address;
      result.before_exit = [master = result.master] { master->Shutdown(std::chrono::seconds(2)); };
      config.node.hosts_master = true;
    } else if (settings.is_host == 1 || options.rdzv_backend == "static") {
      return absl::UnavailableError(absl::StrCat("this node must host the rendezvous master but ",
                                                 server.status().message()));
    }
    // Dynamic mode: another agent on this machine hosts it already; join it as a client.
  }
  if (!result.master && options.rdzv_backend != "static" && master.port == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--rdzv_endpoint=", options.rdzv_endpoint,
        ": port 0 means a free port on the node that hosts the rendezvous master, so only a "
        "one-node job (or the hosting agent) can use it; give the other nodes the port the host "
        "printed, or a fixed port"));
  }
  result.description = absl::StrCat(
      options.rdzv_backend == "static" ? "static" : "dynamic", " rendezvous at ", config.endpoint,
      result.master ? " (hosted here)" : "", ", run '", config.run_id, "', nodes ",
      options.nnodes.min,
      options.nnodes.min == options.nnodes.max ? std::string()
                                               : absl::StrCat(":", options.nnodes.max));
  result.rendezvous = std::make_unique<GrpcRendezvous>(std::move(config));
  return result;
}

}  // namespace

absl::StatusOr<NodeRendezvous> SetUpNetworkRendezvous(const LaunchOptions& options,
                                                      const RendezvousSettings& settings,
                                                      int local_world_size,
                                                      const std::string& host_name) {
  RouteGrpcLogsToSpdlog();
  absl::StatusOr<NodeRendezvous> result =
      SetUpMasterRendezvous(options, settings, local_world_size, host_name);
  if (result.ok() && options.agent_store) {
    // Node rank 0's agent hosts each round's workers' store, on the address and port it joined
    // with (the rendezvous tells every node so).
    WorkersStoreConfig store;
    store.from_rounds = true;
    HostWorkersStore(*result, std::move(store));
  }
  return result;
}

}  // namespace mxrun
