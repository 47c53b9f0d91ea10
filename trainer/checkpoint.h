#pragma once
// Checkpoints: one file, checkpoint.pt, replaced atomically (written to a temporary file in the
// same folder, fsynced, renamed over the old one, folder fsynced), so a worker killed mid-write
// leaves the previous checkpoint intact and loadable. It holds the model's parameters and
// buffers, the optimizer's state, the training progress and LibTorch's CPU generator state.
// The learning-rate schedule is a pure function of the progress, so it needs no state of its own.

#include <cstdint>
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

// The progress stored in `dir`'s checkpoint, or nullopt when there is none. Throws when a file
// exists but cannot be read.
std::optional<TrainingProgress> PeekCheckpoint(const std::string& dir);

// Loads parameters and buffers (copied into the model's own tensors, so their device and memory
// format stay), the optimizer state and the generator state; returns the progress.
TrainingProgress LoadCheckpoint(const std::string& dir, torch::nn::Module& model,
                                torch::optim::Optimizer& optimizer);

}  // namespace mxrun::trainer
