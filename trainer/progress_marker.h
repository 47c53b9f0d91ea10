#pragma once
// The last completed step, kept beside the checkpoint (<ckpt_dir>/progress) so that a process
// restarted from the checkpoint knows how many completed steps the failure cost: the `recovery`
// record's steps_redone. Rank 0 rewrites it in place after every step with one pwrite of a
// fixed-length line (no fsync: it must outlive the process, not the machine); the run id in it
// keeps an older job's marker from being taken for this one's. No LibTorch here.

#include <cstdint>
#include <optional>
#include <string>

namespace mxrun::trainer {

std::string ProgressMarkerPath(const std::string& ckpt_dir);

// The step recorded for `run_id` at `path`; nullopt when there is no marker, it is another run's,
// or the file is not a marker at all.
std::optional<std::int64_t> ReadProgressMarker(const std::string& path, const std::string& run_id);

class ProgressMarker {
 public:
  // Opens (creating its folder) and empties `path`. A marker that cannot be written says so once
  // on stderr and then records nothing: training and checkpoints go on, only a restart's
  // steps_redone will be missing.
  ProgressMarker(std::string path, std::string run_id);
  ~ProgressMarker();
  ProgressMarker(const ProgressMarker&) = delete;
  ProgressMarker& operator=(const ProgressMarker&) = delete;

  void Record(std::int64_t step);

 private:
  void Warn(const char* what);

  std::string path_;
  std::string run_id_;
  int fd_ = -1;
  bool warned_ = false;
};

}  // namespace mxrun::trainer
