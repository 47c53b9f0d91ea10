#include "trainer/options.h"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <sstream>
#include <stdexcept>

namespace mxrun::trainer {
namespace {

// "--batch_size" -> "--batch_size,--batch-size"
std::string BothSpellings(const std::string& name) {
  std::string dashed = name;
  std::replace(dashed.begin(), dashed.end(), '_', '-');
  return dashed == name ? "--" + name : "--" + name + ",--" + dashed;
}

}  // namespace

ParsedTrainerArgs ParseTrainerOptions(int argc, const char* const* argv) {
  TrainerOptions o;
  CLI::App app{"train: ResNet on CIFAR-10, data-parallel over Gloo or NCCL (bundled with mxrun)",
               "train"};
  // As with argparse, a flag given twice takes its last value (scripts append overrides).
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  auto opt = [&](const std::string& name, auto& value, const std::string& help) {
    return app.add_option(BothSpellings(name), value, help)->capture_default_str();
  };
  auto flag = [&](const std::string& name, bool& value, const std::string& help) {
    return app.add_flag(BothSpellings(name), value, help);
  };

  opt("model", o.model, "resnet18, resnet34, resnet50, resnet101 or resnet152")
      ->check(CLI::IsMember({"resnet18", "resnet34", "resnet50", "resnet101", "resnet152"}));
  opt("stem", o.stem, "cifar (3x3 conv, no max-pool) or imagenet (7x7/2 conv, max-pool)")
      ->check(CLI::IsMember({"cifar", "imagenet"}));
  opt("num_classes", o.num_classes, "classes of the final layer")->check(CLI::Range(2, 100000));
  opt("width", o.width, "channels of the first stage (64 as torchvision)")
      ->check(CLI::Range(1, 1024));
  std::string norm = "batch";
  opt("norm", norm, "batch or none (no normalisation layers)")
      ->check(CLI::IsMember({"batch", "none"}));

  opt("data_dir", o.data_dir, "folder with CIFAR-10's .bin files; empty: synthetic data");
  opt("synthetic_train", o.synthetic_train, "synthetic training images")
      ->check(CLI::Range(int64_t{1}, int64_t{10'000'000}));
  opt("synthetic_test", o.synthetic_test, "synthetic test images")
      ->check(CLI::Range(int64_t{1}, int64_t{10'000'000}));
  opt("loader_threads", o.loader_threads, "batch-assembly threads per worker")
      ->check(CLI::Range(1, 64));
  bool no_augment = false;
  flag("no_augment", no_augment, "no random crop and flip");

  opt("batch_size", o.batch_size, "images per worker per step")
      ->check(CLI::Range(int64_t{1}, int64_t{1 << 20}));
  opt("epochs", o.epochs, "passes over the training set")->check(CLI::Range(1, 100000));
  opt("max_steps", o.max_steps, "stop after this many optimizer steps (0: no limit)")
      ->check(CLI::NonNegativeNumber);
  opt("lr", o.lr, "peak learning rate")->check(CLI::PositiveNumber);
  opt("momentum", o.momentum, "SGD momentum")->check(CLI::Range(0.0, 1.0));
  flag("nesterov", o.nesterov, "Nesterov momentum");
  opt("weight_decay", o.weight_decay, "L2 weight decay")->check(CLI::NonNegativeNumber);
  flag("no_decay_bn_bias", o.no_decay_bn_bias,
       "no weight decay on BatchNorm parameters and biases");
  opt("warmup_epochs", o.warmup_epochs, "linear warm-up length in epochs")
      ->check(CLI::NonNegativeNumber);
  std::string schedule = "cosine";
  opt("schedule", schedule, "cosine, step or constant")
      ->check(CLI::IsMember({"cosine", "step", "constant"}));
  opt("milestones", o.milestones, "epochs where the step schedule multiplies lr by --gamma")
      ->delimiter(',')
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  opt("gamma", o.gamma, "step schedule factor")->check(CLI::Range(0.0, 1.0));
  opt("label_smoothing", o.label_smoothing, "label smoothing in [0, 1)")
      ->check(CLI::Range(0.0, 0.999));
  opt("clip_grad_norm", o.clip_grad_norm, "clip the global gradient norm (0: off)")
      ->check(CLI::NonNegativeNumber);
  opt("grad_accum", o.grad_accum, "micro-batches per optimizer step")->check(CLI::Range(1, 4096));
  opt("seed", o.seed, "seed for initialisation, shuffling and augmentation");

  opt("device", o.device, "auto, cpu or cuda")->check(CLI::IsMember({"auto", "cpu", "cuda"}));
  opt("backend", o.backend,
      "auto (nccl on GPU, gloo on CPU; none when alone), nccl or gloo (used even alone)")
      ->check(CLI::IsMember({"auto", "nccl", "gloo"}));
  opt("amp", o.amp, "mixed precision on CUDA: off, bf16 or fp16 (with loss scaling)")
      ->check(CLI::IsMember({"off", "bf16", "fp16"}));
  bool channels_last = false, no_channels_last = false;
  flag("channels_last", channels_last, "channels-last memory format (default on CUDA)");
  flag("no_channels_last", no_channels_last, "keep the contiguous (NCHW) memory format");
  bool no_cudnn_benchmark = false;
  flag("no_cudnn_benchmark", no_cudnn_benchmark,
       "don't autotune cuDNN convolutions (torch.backends.cudnn.benchmark, on by default)");
  opt("bucket_cap_mb", o.bucket_cap_mb, "gradient bucket size in MiB (DDP's bucket_cap_mb)")
      ->check(CLI::Range(0.001, 4096.0));
  opt("threads", o.threads,
      "intra-op threads (0: OMP_NUM_THREADS, else the cores shared among this node's workers)")
      ->check(CLI::Range(0, 1024));
  opt("timeout", o.timeout_seconds, "seconds to wait for the store and for collectives")
      ->check(CLI::PositiveNumber);
  bool no_in_process_restart = false;
  flag("no_in_process_restart", no_in_process_restart,
       "under mxrun, exit when the group is re-formed (mxrun starts a new process, which resumes "
       "from the checkpoint) instead of taking the new round in-process");

  opt("ckpt_dir", o.ckpt_dir, "checkpoint folder (empty: no checkpoints)");
  opt("ckpt_every", o.ckpt_every, "also checkpoint every N steps (0: only at epoch ends)")
      ->check(CLI::NonNegativeNumber);
  flag("resume", o.resume, "resume from the latest checkpoint even on a first start");
  opt("metrics_file", o.metrics_file, "append JSON lines of metrics here (rank 0)");
  opt("tensorboard_dir", o.tensorboard_dir,
      "also write rank 0's metrics as TensorBoard event files into this folder");
  opt("log_every", o.log_every, "progress line every N steps (0: per epoch only)")
      ->check(CLI::NonNegativeNumber);
  bool no_eval = false;
  flag("no_eval", no_eval, "skip evaluation on the test split");
  bool version = false;
  app.add_flag("--version", version, "print the LibTorch, CUDA and NCCL train was built with");

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    return ParsedTrainerArgs{std::nullopt, app.help()};
  } catch (const CLI::ParseError& e) {
    throw std::invalid_argument(e.what());
  }
  if (version) return ParsedTrainerArgs{std::nullopt, "", true};
  o.batch_norm = norm == "batch";
  o.augment = !no_augment;
  o.eval = !no_eval;
  o.in_process_restart = !no_in_process_restart;
  o.cudnn_benchmark = !no_cudnn_benchmark;
  o.schedule = schedule == "cosine" ? ScheduleKind::kCosine
               : schedule == "step" ? ScheduleKind::kStep
                                    : ScheduleKind::kConstant;
  if (channels_last && no_channels_last) {
    throw std::invalid_argument("--channels_last and --no_channels_last contradict");
  }
  if (channels_last) o.channels_last = true;
  if (no_channels_last) o.channels_last = false;
  if (o.amp != "off" && o.device == "cpu") {
    throw std::invalid_argument("--amp " + o.amp + " needs a CUDA device; use --amp off on CPU");
  }
  if (o.backend == "nccl" && o.device == "cpu") {
    throw std::invalid_argument("--backend nccl needs --device cuda (or auto on a GPU)");
  }
#if !defined(MXRUN_WITH_TENSORBOARD)
  if (!o.tensorboard_dir.empty()) {
    throw std::invalid_argument(
        "--tensorboard_dir: this train was built without protobuf, which writes TensorBoard's "
        "events; use --metrics_file (JSON lines), or rebuild with protobuf installed");
  }
#endif
  if (o.warmup_epochs >= o.epochs) {
    std::ostringstream message;
    message << "--warmup_epochs " << o.warmup_epochs << " must be less than --epochs " << o.epochs;
    throw std::invalid_argument(message.str());
  }
  return ParsedTrainerArgs{o, ""};
}

}  // namespace mxrun::trainer
