#pragma once
// A small synchronous client for etcd's v3 gRPC API (the stubs are generated from Debian's
// etcd .proto files, proto/CMakeLists.txt): the key-value store, transactions guarded by a key's
// creation revision (the fencing test of etcd's own concurrency package), leases, creating a key
// only if absent (a lease-bound election), and waiting for a key to change. Every call has a
// deadline; errors are absl::Status with gRPC's code (Unavailable, DeadlineExceeded, ...) and the
// member's message.
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
#include "rendezvous/etcd_config.h"

namespace mxrun {

struct EtcdKeyValue {
  std::string key;
  std::string value;
  int64_t create_revision = 0;  // what fenced transactions compare
  int64_t mod_revision = 0;     // the last write
};

// One key as read, with the store's revision at the read (where a watch for its change starts).
struct EtcdRead {
  std::optional<EtcdKeyValue> kv;
  int64_t revision = 0;
};

// One write of a transaction.
struct EtcdOp {
  enum class Kind { kPut, kDelete, kDeletePrefix };
  Kind kind = Kind::kPut;
  std::string key;
  std::string value;  // kPut
  int64_t lease = 0;  // kPut: the key dies with this lease (0: none)
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
  absl::StatusOr<EtcdRead> Read(const std::string& key);
  absl::StatusOr<std::vector<EtcdKeyValue>> GetPrefix(const std::string& prefix);
  // Applies `ops` atomically if `guard_key` exists with creation revision `guard_rev`; false (and
  // nothing written) when it does not: the writer's leadership has ended.
  absl::StatusOr<bool> TxnIfCreated(const std::string& guard_key, int64_t guard_rev,
                                    const std::vector<EtcdOp>& ops);

  // Creates `key` bound to `lease` unless it exists (a lease-bound election: whoever creates it
  // leads until the lease ends). Returns the key's creation revision, the fence of the holder's
  // writes; nullopt when someone else holds it.
  absl::StatusOr<std::optional<int64_t>> CreateIfAbsent(const std::string& key,
                                                        const std::string& value, int64_t lease);

  absl::StatusOr<int64_t> GrantLease(std::chrono::seconds ttl);
  // One keep-alive; returns the TTL left in seconds (0: the lease has expired and is gone).
  absl::StatusOr<int64_t> KeepAlive(int64_t lease);
  absl::Status RevokeLease(int64_t lease);

  // Waits (at most `wait`) for a change (put or delete) of `key` after revision `after_rev`;
  // returns the revision of the change, nullopt when nothing changed within the wait.
  absl::StatusOr<std::optional<int64_t>> WaitForChange(const std::string& key, int64_t after_rev,
                                                       std::chrono::milliseconds wait);

  // Ends every call in flight, from any thread, and makes later calls fail with Cancelled: how an
  // owner stops a thread waiting in WaitForChange.
  void Cancel();

  struct Stubs;  // the gRPC channel and stubs (etcd_client.cc)

 private:
  bool cancelled_by_owner() const;
  explicit EtcdClient(const EtcdConfig& config, std::unique_ptr<Stubs> stubs);
  EtcdConfig config_;
  std::unique_ptr<Stubs> stubs_;
};

}  // namespace mxrun
