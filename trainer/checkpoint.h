#pragma once
// Checkpoints: one file, checkpoint.pt, replaced atomically (written to a temporary file in the
// same folder, fsynced, renamed over the old one, folder fsynced), so a worker killed mid-write
// leaves the previous checkpoint intact and loadable. It holds the model's parameters and
// buffers, the optimizer's state, the training progress and LibTorch's CPU generator state.
// The learning-rate schedule is a pure function of the progress, so it needs no state of its own.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

namespace torch::nn {
class Module;
}
namespace torch::optim {
class Optimizer;
}

namespace mxrun::trainer {

struct TrainingProgress {
  std::int64_t epoch = 0;             // current epoch (0-based)
  std::int64_t samples_in_epoch = 0;  // samples of this epoch's order already trained on
  std::int64_t samples_seen = 0;      // over the whole run, all ranks together
  std::int64_t step = 0;              // optimizer steps taken
  std::int64_t world_size = 0;        // world size when written
  double loss_scale = 0;              // fp16 loss scaler (0: not used)
};

// Writes the checkpoint. Throws std::runtime_error naming the path on any failure.
void SaveCheckpoint(const std::string& dir, torch::nn::Module& model,
                    torch::optim::Optimizer& optimizer, const TrainingProgress& progress);

// `dir`'s checkpoint, read from disk once: its progress at once, its tensors when loaded.
class CheckpointFile {
 public:
  // Reads the checkpoint onto `model`'s device (where its tensors will be loaded); nullptr when
  // `dir` has none. Throws std::runtime_error when a file exists but cannot be read.
  static std::unique_ptr<CheckpointFile> Open(const std::string& dir,
                                              const torch::nn::Module& model);
  ~CheckpointFile();
  const TrainingProgress& progress() const { return progress_; }
  // Copies parameters and buffers into the model's own tensors (their device and memory format
  // stay), loads the optimizer state and the generator state.
  void LoadInto(torch::nn::Module& model, torch::optim::Optimizer& optimizer);

 private:
  struct Archive;
  CheckpointFile(std::string path, std::unique_ptr<Archive> archive, TrainingProgress progress);
  std::string path_;
  std::unique_ptr<Archive> archive_;
  TrainingProgress progress_;
};

// The progress stored in `dir`'s checkpoint, or nullopt when there is none. Throws when a file
// exists but cannot be read.
std::optional<TrainingProgress> PeekCheckpoint(const std::string& dir);

// CheckpointFile::Open and LoadInto; returns the progress. Throws when there is no checkpoint.
TrainingProgress LoadCheckpoint(const std::string& dir, torch::nn::Module& model,
                                torch::optim::Optimizer& optimizer);

}  // namespace mxrun::trainer
