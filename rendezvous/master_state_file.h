#pragma once
// The master's state folder (mxrun-master --state_dir): the running runs as JSON in
// DIR/state.json, replaced atomically (temporary file, fsync, rename, fsync of the folder) each
// time they change, and read back when the master starts again.

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "rendezvous/master_state.h"

namespace mxrun {

std::string PersistedRunsToJson(const std::vector<PersistedRun>& runs);
absl::StatusOr<std::vector<PersistedRun>> PersistedRunsFromJson(const std::string& json);

class MasterStateFile {
 public:
  // Creates `dir` when missing. Errors name the folder.
  static absl::StatusOr<MasterStateFile> Open(const std::string& dir);

  // What the folder holds (nothing on a first start). A damaged file is an error naming it.
  absl::StatusOr<std::vector<PersistedRun>> Load();
  // Writes `runs` when they differ from what was last written or loaded.
  absl::Status Save(const std::vector<PersistedRun>& runs);

  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::string last_written_;
};

}  // namespace mxrun
