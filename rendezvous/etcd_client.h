#pragma once
// A small synchronous client for etcd's v3 gRPC API (the stubs are generated from Debian's
// etcd .proto files, proto/CMakeLists.txt): the key-value store, transactions guarded by a key's
// creation revision (the fencing test of etcd's own concurrency package), leases, the election
// service, and waiting for a key to change. Every call has a deadline; errors are absl::Status
// with gRPC's code (Unavailable, DeadlineExceeded, ...) and the member's message.
//
// One gRPC channel over every listed member (round robin over their addresses), so a call goes on
// to the other members when one dies. Thread-safe: calls may come from several threads at once.

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
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
absl::StatusOr<EtcdConfig> ParseEtcdConfig(const std::string& endpoints, const std::string& protocol,
                                           const std::string& cacert, const std::string& cert,
                                           const std::string& key);

struct EtcdKeyValue {
  std::string key;
  std::string value;
  int64_t create_revision = 0;  // what fenced transactions compare
};

// One write of a transaction.
struct EtcdOp {
  enum class Kind { kPut, kDelete, kDeletePrefix };
  Kind kind = Kind::kPut;
  std::string key;
  std::string value;  // kPut
  int64_t lease = 0;  // kPut: the key dies with this lease (0: none)
};

// Who holds an election, as etcd's election service names it.
struct EtcdLeaderKey {
  std::string name;  // the election
  std::string key;   // the leader's key; deleting it (or its lease expiring) ends the leadership
  int64_t rev = 0;   // the key's creation revision: what fenced writes are conditioned on
  int64_t lease = 0;
};

class EtcdClient {
 public:
  // Builds the channel (no I/O yet). Errors: InvalidArgument for unreadable TLS files or members
  // whose names do not resolve.
  static absl::StatusOr<std::unique_ptr<EtcdClient>> Connect(const EtcdConfig& config);
  ~EtcdClient();

  // Returns the revision of the write.
  absl::StatusOr<int64_t> Put(const std::string& key, const std::string& value, int64_t lease = 0);
  absl::StatusOr<std::optional<EtcdKeyValue>> Get(const std::string& key);
  absl::StatusOr<std::vector<EtcdKeyValue>> GetPrefix(const std::string& prefix);
  // Applies `ops` atomically if `guard_key` exists with creation revision `guard_rev`; false (and
  // nothing written) when it does not: the writer's leadership has ended.
  absl::StatusOr<bool> TxnIfCreated(const std::string& guard_key, int64_t guard_rev,
                                    const std::vector<EtcdOp>& ops);

  absl::StatusOr<int64_t> GrantLease(std::chrono::seconds ttl);
  // One keep-alive; returns the TTL left in seconds (0: the lease has expired and is gone).
  absl::StatusOr<int64_t> KeepAlive(int64_t lease);
  absl::Status RevokeLease(int64_t lease);

  // Waits (at most `wait`) to become the leader of election `name`, bound to `lease`, announcing
  // `value`. DeadlineExceeded when someone else still leads at the end of the wait.
  absl::StatusOr<EtcdLeaderKey> Campaign(const std::string& name, int64_t lease,
                                         const std::string& value, std::chrono::milliseconds wait);
  // The current leader's key and value; nullopt when nobody leads.
  absl::StatusOr<std::optional<EtcdKeyValue>> Leader(const std::string& name);
  absl::Status Resign(const EtcdLeaderKey& leader);

  // Waits (at most `wait`) for a change (put or delete) of `key` after revision `after_rev`;
  // returns the revision of the change, nullopt when nothing changed within the wait.
  absl::StatusOr<std::optional<int64_t>> WaitForChange(const std::string& key, int64_t after_rev,
                                                       std::chrono::milliseconds wait);

 private:
  struct Stubs;
  explicit EtcdClient(const EtcdConfig& config, std::unique_ptr<Stubs> stubs);
  EtcdConfig config_;
  std::unique_ptr<Stubs> stubs_;
};

}  // namespace mxrun
