#include "rendezvous/etcd/etcd_master_store.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "rendezvous/etcd/etcd_state_layout.h"
#include "rendezvous/master_state/master_state_file.h"

namespace mxrun {
namespace {

constexpr size_t kMaxTrackedStale = 16;

}  // namespace

EtcdMasterStore::EtcdMasterStore(std::shared_ptr<EtcdClient> client, std::string prefix,
                                 std::string leader_key, int64_t leader_rev)
    : client_(std::move(client)),
      prefix_(std::move(prefix)),
      leader_key_(std::move(leader_key)),
      leader_rev_(leader_rev) {}

absl::StatusOr<std::vector<PersistedRun>> EtcdMasterStore::Load() {
  absl::StatusOr<std::vector<EtcdKeyValue>> kvs = client_->GetPrefix(EtcdStatePrefix(prefix_));
  if (!kvs.ok()) return kvs.status();
  absl::StatusOr<EtcdState> state = ReadEtcdState(prefix_, *kvs);
  if (!state.ok()) return state.status();
  generation_ = state->generation;
  stale_ = state->stale;
  next_generation_ = generation_ + 1;
  for (int64_t g : stale_) next_generation_ = std::max(next_generation_, g + 1);
  last_written_ = PersistedRunsToJson(state->runs);
  return std::move(state->runs);
}

absl::Status EtcdMasterStore::Save(const std::vector<PersistedRun>& runs) {
  std::string json = PersistedRunsToJson(runs);
  if (json == last_written_) return absl::OkStatus();
  const int64_t generation = next_generation_++;
  // Until the last transaction lands, this generation's pages are leftovers for the next write
  // to remove. Bounded, so that the removal fits in a transaction after a long etcd outage (each
  // failed attempt is a generation); anything forgotten is found again by the next Load().
  stale_.push_back(generation);
  if (stale_.size() > kMaxTrackedStale) stale_.erase(stale_.begin());
  std::vector<int64_t> stale(stale_.begin(), stale_.end() - 1);
  for (const std::vector<EtcdOp>& txn :
       PlanEtcdStateWrite(prefix_, generation, generation_, runs, stale)) {
    absl::StatusOr<bool> applied = client_->TxnIfCreated(leader_key_, leader_rev_, txn);
    if (!applied.ok()) {
      // Whatever etcd said (unreachable, no quorum, a refusal): transient for the master, which
      // tries again; only the fence below means it has been replaced.
      return absl::UnavailableError(applied.status().message());
    }
    if (!*applied) {
      return absl::FailedPreconditionError(
          absl::StrCat("the leadership ", leader_key_, " (created at revision ", leader_rev_,
                       ") has ended in etcd: another master leads"));
    }
  }
  generation_ = generation;
  stale_.clear();
  last_written_ = std::move(json);
  return absl::OkStatus();
}

}  // namespace mxrun
