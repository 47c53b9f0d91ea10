#pragma once
// The master's state folder (mxrun-master --state_dir): the running runs as JSON in
// DIR/state.json, replaced atomically (temporary file, fsync, rename, fsync of the folder) each
// time they change, and read back when the master starts again.

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "rendezvous/master_state/master_state.h"
#include "rendezvous/master_state/master_state_store.h"

namespace mxrun {

std::string PersistedRunsToJson(const std::vector<PersistedRun>& runs);
absl::StatusOr<std::vector<PersistedRun>> PersistedRunsFromJson(const std::string& json);

class MasterStateFile final : public MasterStateStore {
 public:
  // Creates `dir` when missing. Errors name the folder.
  static absl::StatusOr<std::unique_ptr<MasterStateFile>> Open(const std::string& dir);

  absl::StatusOr<std::vector<PersistedRun>> Load() override;
  absl::Status Save(const std::vector<PersistedRun>& runs) override;
  bool fenced() const override { return false; }
  std::string Where() const override { return path_; }

 private:
  std::string path_;
  std::string last_written_;
};

}  // namespace mxrun
