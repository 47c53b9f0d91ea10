#pragma once
// The master's kept state in etcd (--rdzv_backend=etcd), laid out by etcd_state_layout.h, every
// write a transaction fenced on the writer's leadership key: once a successor holds that key (a
// new creation revision), this store's writes are refused whole and Save returns
// FailedPrecondition, on which the master steps down.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "rendezvous/etcd/etcd_client.h"
#include "rendezvous/master_state/master_state_store.h"

namespace mxrun {

class EtcdMasterStore final : public MasterStateStore {
 public:
  // `prefix`: the master's key prefix (EtcdMasterKeys::prefix); `leader_key` and `leader_rev`:
  // the leadership this master holds (the fence).
  EtcdMasterStore(std::shared_ptr<EtcdClient> client, std::string prefix, std::string leader_key,
                  int64_t leader_rev);

  absl::StatusOr<std::vector<PersistedRun>> Load() override;
  absl::Status Save(const std::vector<PersistedRun>& runs) override;
  bool fenced() const override { return true; }
  std::string Where() const override { return "etcd under " + prefix_ + "/state/"; }

 private:
  std::shared_ptr<EtcdClient> client_;
  const std::string prefix_;
  const std::string leader_key_;
  const int64_t leader_rev_;
  int64_t generation_ = 0;       // the current generation in etcd (0: none)
  int64_t next_generation_ = 1;  // never reused: a write cut short leaves pages behind
  std::vector<int64_t> stale_;   // generations with pages that are not current
  std::string last_written_;     // the runs as last read or written (JSON), to skip repeats
};

}  // namespace mxrun
