#pragma once
// Where a master keeps its running runs (MasterState::Persisted()) so that a successor can carry
// on: a state folder (master_state_file.h, mxrun-master --state_dir) or etcd
// (etcd_master_store.h, --rdzv_backend=etcd).

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "rendezvous/master_state/master_state.h"

namespace mxrun {

class MasterStateStore {
 public:
  virtual ~MasterStateStore() = default;

  // What the store holds (nothing on a first start). Damaged contents are an error naming them.
  virtual absl::StatusOr<std::vector<PersistedRun>> Load() = 0;
  // Writes `runs` when they differ from what was last written or loaded. Errors:
  // FailedPrecondition when this master may no longer write (a fenced store whose leadership has
  // ended: the master must stop serving); anything else is transient and the write is tried again.
  virtual absl::Status Save(const std::vector<PersistedRun>& runs) = 0;
  // A fenced store is the single source of truth shared with successors: the master tells agents
  // nothing that is not written there first, and holds its decisions while a write cannot be made.
  // (A state folder is this master's own: a failed write is warned about, not waited for.)
  virtual bool fenced() const = 0;
  // For messages: the file or the etcd prefix.
  virtual std::string Where() const = 0;
};

}  // namespace mxrun
