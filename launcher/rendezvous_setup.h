#pragma once
// Choosing and building this node's rendezvous from the flags:
//   --nnodes=1 (static, the default) or --standalone: LocalRendezvous, no network at all;
//   static multi-node (--nnodes=N --node_rank=K --master_addr=A --master_port=P): node rank 0 hosts
//     the master on A:P, every node joins it with its rank;
//   dynamic (--rdzv_backend=c10d --rdzv_endpoint=H[:P] --rdzv_id=ID --nnodes=MIN:MAX): join the
//     master at H:P; the agent hosts it when is_host=1, or when H is this machine and nobody else
//     has bound H:P yet.
//   etcd (--rdzv_backend=etcd or etcd-v2 --rdzv_endpoint=ETCD[,ETCD...] --rdzv_id=ID): the master
//   is
//     elected in etcd among the job's agents (or mxrun-master replicas with master_service=NAME)
//     and keeps its state there; agents follow whoever leads (rendezvous/etcd/etcd_leadership.h).
// --rdzv_conf keys: join_timeout, last_call_timeout, heartbeat_interval (keep_alive_interval),
// missed_heartbeats (keep_alive_max_attempt), close_timeout (accepted), is_host, bind_all,
// token_file (the token, else MXRUN_RDZV_TOKEN: token.h); with etcd also protocol, cacert, cert,
// key, lease_ttl (seconds), etcd_prefix and master_service.

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "agent/store/workers_store_rendezvous.h"
#include "common/env_contract.h"
#include "common/tls_files.h"
#include "launcher/launch_flags/launch_options.h"
#include "rendezvous/etcd_config.h"
#include "rendezvous/master_state/master_state.h"
#include "rendezvous/net.h"
#include "rendezvous/rendezvous.h"

namespace mxrun {

class MasterServer;

struct RendezvousSettings {
  RendezvousTimeouts timeouts;
  int is_host = -1;  // -1: decide; 0: never host; 1: host
  bool bind_all = false;
  std::string token;
  TlsFiles tls;  // c10d: mutual TLS with the master (cert, key, cacert)
  // --rdzv_backend=etcd:
  EtcdConfig etcd;
  std::chrono::seconds lease_ttl = kDefaultEtcdLeaseTtl;
  std::string etcd_prefix = kDefaultEtcdPrefix;
  std::string master_service;  // follow this mxrun-master service instead of electing an agent
  std::string nvlink_domain;   // this node's (agent/node/gpu_devices.h), for the rank order
};

// Checks the node and rendezvous flags as a launch does before it starts anything, and returns
// the settings: --node_rank against --nnodes; for a job that NeedsNetwork, the static or dynamic
// flag combinations, --rdzv_endpoint and --rdzv_id; --rdzv_conf and its token. No network, cheap:
// --print-config runs it too. Errors: InvalidArgument naming the flag or key and what is accepted
// (exit 2).
absl::StatusOr<RendezvousSettings> CheckRendezvousFlags(const LaunchOptions& options,
                                                        const EnvMap& env);

// --rdzv_endpoint as host and port (kDefaultRendezvousPort when it names none).
absl::StatusOr<HostPort> RendezvousEndpoint(const LaunchOptions& options);

struct NodeRendezvous {
  // Set when this agent hosts the master. A shared_ptr: its deleter is bound where the server is
  // made, so code that only holds it needs no gRPC.
  std::shared_ptr<MasterServer> master;
  std::string master_address;
  // With --rdzv_backend=etcd, when this agent is a candidate: the runs of the master it serves
  // while it leads (nullopt while it does not), and where the elected master serves.
  std::function<std::optional<std::vector<RunSnapshot>>()> elected_runs;
  std::function<std::string()> elected_master;
  // Called after the agent's loop: a hosting agent lets the other nodes receive the outcome before
  // its master goes away.
  std::function<void()> before_exit;
  std::unique_ptr<Rendezvous> rendezvous;
  std::string description;  // one line for the log
  // Set when the agent hosts the workers' store (agent/store/store_metrics.h reads it).
  std::function<std::optional<StoreTotals>()> store_totals;
};

// True when the job has more than one node (or names a rendezvous endpoint) and so needs the
// gRPC rendezvous. The `mxrun` binary carries no gRPC, to keep single-node launches small and fast;
// for such jobs it hands over to its sibling `mxrun-multinode` (same flags, same code, with gRPC).
bool NeedsNetwork(const LaunchOptions& options);

// The single-node rendezvous (rendezvous_setup.cc, no gRPC).
absl::StatusOr<NodeRendezvous> SetUpLocalRendezvous(const LaunchOptions& options,
                                                    int local_world_size,
                                                    const std::string& standalone_run_id);

// Puts the workers' store in this agent (agent/store/workers_store_rendezvous.h) in front of
// `node`'s rendezvous, and its totals in `node.store_totals`.
void HostWorkersStore(NodeRendezvous& node, WorkersStoreConfig config);

// The multi-node rendezvous (rendezvous_setup_network.cc, links gRPC) for options that passed
// CheckRendezvousFlags: starts the in-process master when this node hosts it. Errors: Unavailable
// when the master cannot be hosted where it must be (exit 3).
absl::StatusOr<NodeRendezvous> SetUpNetworkRendezvous(const LaunchOptions& options,
                                                      const RendezvousSettings& settings,
                                                      int local_world_size,
                                                      const std::string& host_name);

}  // namespace mxrun
