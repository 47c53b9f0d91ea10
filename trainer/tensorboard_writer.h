#pragma once
// --tensorboard_dir: rank 0's metrics as a TensorBoard event file, beside the JSON lines.
// The file is named as PyTorch's SummaryWriter names it (events.out.tfevents.<unix seconds>.
// <host>.<pid>.0), starts with the file-version record TensorBoard expects, and gets one Event
// of scalar summaries per metrics record, flushed at once: a crash loses at most the record being
// written, and a restarted rank 0 starts a new file in the same folder, which TensorBoard reads
// as one run. No LibTorch here; the messages are protobuf (tensorboard_event.proto).

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace mxrun::trainer {

struct Scalar {
  std::string tag;
  float value = 0;
};

// The scalars a metrics record (MetricsLog's JSON) shows in TensorBoard, and their tags:
//   step     loss/train, accuracy/train, lr, images_per_sec
//   epoch    loss/train_epoch, accuracy/train_epoch, images_per_sec_epoch, loss/test,
//            accuracy/test (when evaluated)
//   recovery recovery/seconds_lost, recovery/steps_redone
// Other records (start, resume, done, memory) have none. Fields missing from a record are
// skipped; a field that is not a number is skipped too (it is our own log, not user input).
std::vector<Scalar> ScalarsOfRecord(const nlohmann::json& record);

class TensorBoardWriter {
 public:
  // Creates `dir` (and its parents) and a new event file in it. Throws std::runtime_error naming
  // the path when either cannot be created.
  TensorBoardWriter(const std::string& dir, double wall_time);

  // One Event at `step` holding `scalars`; nothing is written for none. Throws on a write error.
  void Write(std::int64_t step, double wall_time, const std::vector<Scalar>& scalars);

  // This file's steps start at `first_step`: a SessionLog START there, once per file (later calls
  // do nothing). TensorBoard takes the first START of a run as its start and every later one as
  // a restart, dropping what it read for that step and after: so when a process restarted from
  // a checkpoint trains steps again, only their new values show. Throws on a write error.
  void StartSession(std::int64_t first_step, double wall_time);

  const std::string& path() const { return path_; }

 private:
  void Append(const std::string& serialized_event);

  std::string path_;
  std::unique_ptr<FILE, int (*)(FILE*)> file_;
  bool session_started_ = false;
};

}  // namespace mxrun::trainer
