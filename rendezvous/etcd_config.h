#pragma once
// Where a job's etcd is and how the master uses it (--rdzv_backend=etcd): the members, TLS, the
// leadership lease and the key prefix. No gRPC: the `mxrun` binary checks these flags itself.
//
// Keys, under the prefix P (EtcdMasterKeys):
//   P/leader       the master's leadership: created with the leader's lease, value
//                  "IDENTITY ADDRESS" (address empty while the new leader starts its server)
//   P/last_leader  the identity of the latest leader (no lease): its successor knows whose lease
//                  expired
//   P/state/...    the kept state (etcd_state_layout.h)
// P is ETCD_PREFIX/run/RUN_ID for a master hosted by the job's agents (every agent a candidate),
// or ETCD_PREFIX/service/NAME for mxrun-master replicas (agents with master_service=NAME follow).

#include <chrono>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace mxrun {

struct EtcdConfig {
  std::vector<std::string> endpoints;  // "host:port" of each member (default port 2379)
  bool tls = false;                    // protocol=https
  std::string cacert, cert, key;       // PEM files (cert and key: client authentication)
  std::chrono::milliseconds rpc_timeout{2000};
};

// "host:port,host:port" (torchrun's --rdzv_endpoint for etcd) with the rdzv_conf keys protocol,
// cacert, cert and key. Errors: InvalidArgument naming the bad part and what is accepted.
absl::StatusOr<EtcdConfig> ParseEtcdConfig(const std::string& endpoints,
                                           const std::string& protocol, const std::string& cacert,
                                           const std::string& cert, const std::string& key);

// The leadership lease. 2 s: a dead master is replaced within 2 s of its last keep-alive, which
// the 3 s target for a master host's death needs; and it is the shortest lease etcd grants with
// its default 1 s election timeout (etcd raises shorter ones to 1.5 x the election timeout). A
// keep-alive goes every third of it, so two can be lost before the lease is in danger.
constexpr std::chrono::seconds kDefaultEtcdLeaseTtl{2};
constexpr const char* kDefaultEtcdPrefix = "/mxrun";
constexpr int kDefaultEtcdPort = 2379;

struct EtcdMasterKeys {
  std::string prefix;  // P
  std::string leader() const { return prefix + "/leader"; }
  std::string last_leader() const { return prefix + "/last_leader"; }
};

EtcdMasterKeys EtcdKeysForRun(const std::string& etcd_prefix, const std::string& run_id);
EtcdMasterKeys EtcdKeysForService(const std::string& etcd_prefix, const std::string& service);

// An etcd_prefix or master_service value. Errors: InvalidArgument saying what is accepted.
absl::Status ValidateEtcdPrefix(const std::string& prefix);
absl::Status ValidateServiceName(const std::string& name);

// P/leader's value: who leads and where it serves ("" while starting).
std::string EncodeLeaderValue(const std::string& identity, const std::string& address);
struct LeaderValue {
  std::string identity;
  std::string address;
};
LeaderValue DecodeLeaderValue(const std::string& value);

}  // namespace mxrun
