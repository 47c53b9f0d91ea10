#pragma once
// The trainer's command line. Flags mirror common PyTorch training scripts (--model resnet50
// --batch_size 128 --epochs 100 --lr 0.1 ...), accepted with '_' or '-'. Bad values throw
// std::invalid_argument naming the flag and what it accepts; main turns them into exit code 2.

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "trainer/lr_schedule.h"

namespace mxrun::trainer {

struct TrainerOptions {
  // Model
  std::string model = "resnet18";  // resnet18|34|50|101|152
  std::string stem = "cifar";      // cifar (3x3, stride 1, no max-pool) | imagenet
  int num_classes = 10;
  int width = 64;          // channels of the first stage (torchvision: 64)
  bool batch_norm = true;  // --norm none replaces BatchNorm by identity (tests)

  // Data
  std::string data_dir;  // CIFAR-10 binary folder; empty: synthetic data
  std::int64_t synthetic_train = 50000;
  std::int64_t synthetic_test = 10000;
  int loader_threads = 2;
  bool augment = true;

  // Optimisation
  std::int64_t batch_size = 128;  // per worker, as with DDP and DistributedSampler
  int epochs = 100;
  std::int64_t max_steps = 0;  // stop after this many optimizer steps (0: no limit)
  double lr = 0.1;
  double momentum = 0.9;
  bool nesterov = false;
  double weight_decay = 1e-4;
  bool no_decay_bn_bias = false;  // no weight decay on BatchNorm weights and biases
  double warmup_epochs = 0;
  ScheduleKind schedule = ScheduleKind::kCosine;
  std::vector<double> milestones{30, 60, 90};
  double gamma = 0.1;
  double label_smoothing = 0;
  double clip_grad_norm = 0;  // 0: no clipping
  int grad_accum = 1;
  std::uint64_t seed = 0;

  // Devices and communication
  std::string device = "auto";        // auto | cpu | cuda
  std::string backend = "auto";       // auto | nccl | gloo
  std::string amp = "off";            // off | bf16 | fp16 (CUDA only)
  std::optional<bool> channels_last;  // default: on for CUDA
  bool cudnn_benchmark = true;        // autotune cuDNN convolutions per input shape (CUDA)
  double bucket_cap_mb = 25;
  int threads = 0;                 // intra-op threads; 0: OMP_NUM_THREADS, else cores / workers
  double timeout_seconds = 300;    // store and collective timeout
  bool in_process_restart = true;  // take mxrun's re-formed rounds without exiting

  // Checkpoints, metrics, output
  std::string ckpt_dir = "checkpoints";  // empty: no checkpoints
  std::int64_t ckpt_every = 0;           // also every N steps (0: only at epoch ends)
  bool resume = false;                   // load the latest checkpoint even on a first start
  std::string metrics_file;
  std::string tensorboard_dir;  // rank 0 also writes TensorBoard event files here
  std::int64_t log_every = 50;  // progress line every N steps (0: only per epoch)
  bool eval = true;
};

struct ParsedTrainerArgs {
  std::optional<TrainerOptions> options;
  std::string help_text;  // --help: print and exit 0
  bool version = false;   // --version: print what train was built with and exit 0
};

// The options are valid, but this machine cannot do what they ask (--device cuda where no GPU is
// visible, --backend nccl on a build without NCCL): train says so in one line and exits 2, as for
// a bad flag, since restarting cannot help.
class UnmetRequest : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

ParsedTrainerArgs ParseTrainerOptions(int argc, const char* const* argv);

}  // namespace mxrun::trainer
