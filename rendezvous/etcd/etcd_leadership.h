#pragma once
// The rendezvous master's election in etcd (--rdzv_backend=etcd): who serves, where, and the
// takeover when it dies. One object per process: a candidate (every agent of a job, each
// mxrun-master replica) and, for its agent, the MasterLocator that says where the master is.
//
// The election is one transaction: create P/leader bound to the candidate's lease unless it exists
// (EtcdClient::CreateIfAbsent). The winner reads P/last_leader (whose lease expired before it won),
// starts a MasterServer whose state lives in etcd, fenced on P/leader's creation revision
// (EtcdMasterStore), tells that server the previous leader's agent is gone, then publishes its
// address in P/leader (same key, so the fence holds) and keeps the lease alive every third of its
// TTL. Everyone else watches P/leader and follows the address in it.
//
// Why not etcd's election service (v3election Campaign): a campaign is a key and a lease per
// candidate, held for as long as it waits; with every agent of a 16,384-node job a candidate that
// is 16,384 leases kept alive for nothing. Here a waiting candidate holds a watch only, and takes
// a lease only for the moment it tries to win. The safety argument is the same as the election
// service's: leadership is a key that dies with its holder's lease, and every write is fenced on
// that key's creation revision.
//
// Leadership ends when the lease is gone (a keep-alive answers TTL 0: this process was paused or
// cut off longer than the TTL) or a fenced write is refused; the server then stops serving at once
// and the object becomes a candidate again. An etcd that cannot be reached does not end it: the
// lease cannot expire without etcd either, and the master holds its decisions until it can write
// them (rendezvous_service.h), so running workers are not disturbed.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "rendezvous/client/master_locator.h"
#include "rendezvous/etcd/etcd_client.h"
#include "rendezvous/etcd_config.h"
#include "rendezvous/master_server/master_server.h"

namespace mxrun {

struct EtcdElectionConfig {
  EtcdConfig etcd;
  EtcdMasterKeys keys;
  std::chrono::seconds lease_ttl = kDefaultEtcdLeaseTtl;
  bool candidate = true;       // false: only follow (agents of a master service)
  std::string identity;        // the agent id, or "mxrun-master@HOST:PID"
  MasterServerOptions master;  // where a won master listens (port 0: the kernel picks)
  std::function<void(const std::string&)> log;  // one line per leadership change (stderr if unset)
};

class EtcdMasterElection final : public MasterLocator {
 public:
  // Connects (no I/O yet) and starts the election's thread. Errors: the etcd client's.
  static absl::StatusOr<std::unique_ptr<EtcdMasterElection>> Start(EtcdElectionConfig config);
  ~EtcdMasterElection() override;

  // Stops campaigning; a leader shuts its server down (waiting up to `grace` for calls to finish)
  // and revokes its lease, so that a successor takes over at once.
  void Shutdown(std::chrono::milliseconds grace = std::chrono::milliseconds(500));

  std::string Current() override;
  void Subscribe(std::function<void(const std::string&)> on_change) override;
  // How many times this process has won (for logs and tests).
  int terms_won() const { return terms_won_; }
  // The runs this candidate serves while it leads (its metrics and status page); nullopt while it
  // does not. Thread-safe.
  std::optional<std::vector<RunSnapshot>> SnapshotIfLeading();

 private:
  explicit EtcdMasterElection(EtcdElectionConfig config);
  void Loop();
  // Serves one term; returns when the leadership ends or on Shutdown.
  void Lead(int64_t lease, int64_t leader_rev);
  void Publish(const std::string& address);
  void Log(const std::string& line);
  // Sleeps up to `d` unless shutting down; false when shutting down.
  bool Pause(std::chrono::milliseconds d);

  const EtcdElectionConfig config_;
  std::unique_ptr<EtcdClient> watch_client_;  // watches; cancelled by Shutdown
  std::shared_ptr<EtcdClient> client_;        // leases, the election, the state
  std::mutex mutex_;
  std::condition_variable wake_;
  bool closing_ = false;
  bool deposed_ = false;  // the term's server was refused a write
  std::chrono::milliseconds grace_{500};
  std::string current_;
  std::function<void(const std::string&)> on_change_;
  std::atomic<int> terms_won_{0};
  // The term's server while it serves, for SnapshotIfLeading. Its own lock, never taken under
  // mutex_: a snapshot takes the server's lock, and the server calls back into mutex_ under it.
  std::mutex serving_mutex_;
  MasterServer* serving_ = nullptr;
  std::thread thread_;
};

}  // namespace mxrun
