#include "trainer/trainer.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <stdexcept>
#include <thread>

#include <ATen/Context.h>
#include <ATen/autocast_mode.h>
#include <torch/cuda.h>
#include <torch/nn/functional/loss.h>
#include <torch/optim/sgd.h>
#include <torch/version.h>
#if defined(MXRUN_WITH_CUDA)
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#endif

#include "trainer/batch_loader.h"
#include "trainer/bucket_plan.h"
#include "trainer/checkpoint.h"
#include "trainer/cifar10.h"
#include "trainer/collectives.h"
#include "trainer/control_channel.h"
#include "trainer/distributed_sampler.h"
#include "trainer/gradient_reducer.h"
#include "trainer/heartbeat.h"
#include "trainer/lr_schedule.h"
#include "trainer/metrics_log.h"
#include "trainer/progress_marker.h"
#include "trainer/resnet.h"
#include "trainer/sgd.h"
#include "trainer/synthetic_data.h"
#if defined(MXRUN_WITH_TENSORBOARD)
#include "trainer/tensorboard_writer.h"
#endif

extern char** environ;

namespace mxrun::trainer {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

torch::Device ChooseDevice(const TrainerOptions& o, const WorkerIdentity& id) {
  if (o.device == "cpu") return torch::kCPU;
  const bool cuda = torch::cuda::is_available();
  if (o.device == "cuda" && !cuda) {
    throw std::runtime_error(
        "--device cuda: no CUDA device is visible to this process (or this trainer was built "
        "against a CPU-only LibTorch)");
  }
  if (!cuda) return torch::kCPU;
  const int index = id.local_rank % static_cast<int>(torch::cuda::device_count());
#if defined(MXRUN_WITH_CUDA)
  c10::cuda::set_device(static_cast<c10::DeviceIndex>(index));
#endif
  return torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(index));
}

CommBackend ChooseBackend(const TrainerOptions& o, const torch::Device& device) {
  if (o.backend == "gloo") return CommBackend::kGloo;
  if (o.backend == "nccl") {
    if (!device.is_cuda()) throw std::runtime_error("--backend nccl needs a CUDA device");
    if (!NcclAvailable()) throw std::runtime_error("--backend nccl: built without NCCL");
    return CommBackend::kNccl;
  }
  return device.is_cuda() && NcclAvailable() ? CommBackend::kNccl : CommBackend::kGloo;
}

// Turns CUDA autocast on or off (PyTorch 2.4 made the device an argument).
void SetCudaAutocast(bool enabled, at::ScalarType dtype) {
#if TORCH_VERSION_MAJOR >= 2 && TORCH_VERSION_MINOR >= 4 || TORCH_VERSION_MAJOR >= 3
  if (enabled) at::autocast::set_autocast_dtype(at::kCUDA, dtype);
  at::autocast::set_autocast_enabled(at::kCUDA, enabled);
#else
  if (enabled) at::autocast::set_autocast_gpu_dtype(dtype);
  at::autocast::set_enabled(enabled);
#endif
}

// Mixed precision for the forward pass, on CUDA only.
class AutocastScope {
 public:
  AutocastScope(bool enabled, at::ScalarType dtype) : enabled_(enabled) {
    if (enabled_) SetCudaAutocast(true, dtype);
  }
  ~AutocastScope() {
    if (!enabled_) return;
    SetCudaAutocast(false, at::kFloat);
    at::autocast::clear_cache();
  }

 private:
  bool enabled_;
};

// fp16 loss scaling as torch.cuda.amp.GradScaler: scale the loss, unscale the gradients, skip
// steps whose gradients overflowed and halve the scale, double it after 2000 clean steps.
struct LossScaler {
  bool enabled = false;
  double scale = 65536.0;
  int clean_steps = 0;

  // Unscales the parameters' gradients in place; returns false when the step must be skipped.
  bool Unscale(const std::vector<torch::Tensor>& params) {
    std::vector<torch::Tensor> grads;
    for (const auto& p : params) grads.push_back(p.grad());
    auto found_inf = torch::zeros({1}, grads.front().options().dtype(torch::kFloat));
    auto inv_scale = torch::full({1}, 1.0 / scale, grads.front().options().dtype(torch::kFloat));
    at::_amp_foreach_non_finite_check_and_unscale_(grads, found_inf, inv_scale);
    const bool ok = found_inf.item<float>() == 0.0f;
    if (!ok) {
      scale *= 0.5;
      clean_steps = 0;
    } else if (++clean_steps == 2000) {
      scale *= 2.0;
      clean_steps = 0;
    }
    return ok;
  }
};

// Sums of loss, correct predictions and samples, reduced across ranks exactly.
struct Tally {
  torch::Tensor loss_sum;  // on the training device, so steps never wait for the GPU
  torch::Tensor correct;
  std::int64_t count = 0;

  explicit Tally(torch::Device device)
      : loss_sum(torch::zeros({}, torch::TensorOptions().dtype(torch::kFloat64).device(device))),
        correct(torch::zeros({}, torch::TensorOptions().dtype(torch::kInt64).device(device))) {}

  // `batch_loss_sum`: float64, detached; `batch_correct`: predictions equal to the labels.
  void Add(const torch::Tensor& batch_loss_sum, const torch::Tensor& batch_correct,
           std::int64_t batch_size) {
    loss_sum += batch_loss_sum;
    correct += batch_correct;
    count += batch_size;
  }
};

// One batch's contribution to a Tally, computed once however many tallies it goes to.
struct BatchScore {
  torch::Tensor loss_sum;
  torch::Tensor correct;
  std::int64_t size;

  BatchScore(const torch::Tensor& logits, const torch::Tensor& labels,
             const torch::Tensor& batch_loss_sum)
      : loss_sum(batch_loss_sum.detach().to(torch::kFloat64)),
        correct((logits.argmax(1) == labels).sum()),
        size(labels.size(0)) {}
  void AddTo(Tally& tally) const { tally.Add(loss_sum, correct, size); }
};

// The host memory of a loader batch: pinned on CUDA, so copies to the GPU run asynchronously.
struct BatchTensors {
  torch::Tensor images, labels;
};

struct TallyResult {
  double loss = 0;
  double accuracy = 0;
  std::int64_t count = 0;
};

class Trainer {
 public:
  Trainer(const TrainerOptions& o, const WorkerIdentity& id) : o_(o), id_(id) {}
  ~Trainer();
  int Run();

 private:
  std::string BackendName(CommBackend backend) const {
    if (!comm_) return "none";
    return backend == CommBackend::kNccl ? "nccl" : "gloo";
  }
  void Say(const char* format, auto... args) {
    if (id_.rank != 0) return;
    std::printf(format, args...);
    std::fputc('\n', stdout);
    std::fflush(stdout);
  }
  void StartLoadingData(int threads);
  const ImageSet& TestSet();  // waits for it the first time
  void BuildModel();
  void Restore();
  void OpenMetrics();
  void StartTensorBoardSession();
  void RunRound();
  void ApplyRound(const RoundNotice& notice, const std::string& why);
  void RecordRecovery();
  bool WaitAsStandby();
  void WarmUp();
  void TrainEpoch(std::int64_t epoch);
  TallyResult Reduce(const Tally& tally);
  TallyResult Evaluate();
  void Checkpoint();
  void ReportMemory();
  BatchAllocator Allocator();
  std::pair<torch::Tensor, torch::Tensor> ToDevice(const Batch& batch);
  bool Done() const { return o_.max_steps > 0 && progress_.step >= o_.max_steps; }

  const TrainerOptions& o_;
  WorkerIdentity id_;  // a round taken in-process (control_channel.h) changes it
  torch::Device device_{torch::kCPU};
  bool channels_last_ = false;
  bool amp_ = false;
  at::ScalarType amp_dtype_ = at::kBFloat16;
  CommBackend backend_ = CommBackend::kGloo;
  std::unique_ptr<Collectives> comm_;
  // Process groups left by in-process restarts. Never destroyed: a group's destructor joins its
  // threads, which may sit in a receive from a dead peer until the timeout. A few per restart.
  std::vector<Collectives*> abandoned_;
  std::unique_ptr<ControlChannel> control_;  // mxrun's in-process restart (null: not offered)
  bool have_state_ = false;         // the model holds a trained state all ranks agreed on
  TrainingProgress completed_;      // progress_ at the last completed optimizer step
  bool started_ = false;            // the start record is written once
  // Recovery under way: when the failure was seen (wall clock), where it stood (the last step
  // completed before it: from memory in-process, from the progress marker after a restart).
  double failure_time_ = 0;
  std::int64_t failed_at_step_ = -1;
  std::unique_ptr<ProgressMarker> marker_;  // rank 0's, with --ckpt_dir
  std::string restored_from_ = "none";  // "memory", "checkpoint" or "none" (last Restore)
  ImageSet train_set_, test_set_;
  std::future<ImageSet> train_set_future_;
  std::future<ImageSet> test_set_future_;  // the loading task: the test split after the training one
  ResNet model_{nullptr};
  std::vector<torch::Tensor> params_, buffers_;
  std::unique_ptr<torch::optim::SGD> optimizer_;
  std::unique_ptr<GradientReducer> reducer_;
  LrSchedule schedule_;
  LossScaler scaler_;
  TrainingProgress progress_;
  std::unique_ptr<MetricsLog> metrics_;
#if defined(MXRUN_WITH_TENSORBOARD)
  std::shared_ptr<TensorBoardWriter> tensorboard_;  // rank 0's, with --tensorboard_dir
#endif
  SamplerConfig sampler_;
  std::int64_t planned_steps_ = 0;
  // mxrun's hang detection: beats on progress (made once the worker has its place).
  std::unique_ptr<Heartbeat> heartbeat_ = std::make_unique<Heartbeat>("");
  int round_ = 0;  // the rendezvous round this worker is in (MXRUN_ROUND, then each notice)
  bool joined_ = false;  // told the agent it trains in round_
};

// Data preparation runs beside the model's construction and the process group's rendezvous
// (both wait on other things: allocation, peers); the test split, needed first at the end of the
// first epoch, is made behind the training split and not at all without evaluation.
void Trainer::StartLoadingData(int threads) {
  if (!o_.data_dir.empty() && o_.num_classes != 10) {
    throw std::runtime_error("CIFAR-10 has 10 classes; --num_classes is " +
                             std::to_string(o_.num_classes));
  }
  // Generation runs on every core: it is on a starting worker's critical path, and a replacement
  // rank starts while the kept ones wait for it.
  threads = std::max<int>(threads, std::min(8u, std::max(1u, std::thread::hardware_concurrency())));
  auto make = [this, threads](bool train) {
    if (!o_.data_dir.empty()) return ReadCifar10(o_.data_dir, train ? Split::kTrain : Split::kTest);
    return train ? MakeSyntheticImages(o_.synthetic_train, o_.num_classes, 1000 + o_.seed, threads)
                 : MakeSyntheticImages(o_.synthetic_test, o_.num_classes, 2000 + o_.seed, threads);
  };
  std::promise<ImageSet> train;
  train_set_future_ = train.get_future();
  test_set_future_ = std::async(std::launch::async,
                                [this, make, train = std::move(train)]() mutable -> ImageSet {
    try {
      train.set_value(make(true));
    } catch (...) {
      train.set_exception(std::current_exception());
      return {};
    }
    return o_.eval ? make(false) : ImageSet{};
  });
}

const ImageSet& Trainer::TestSet() {
  if (test_set_future_.valid()) test_set_ = test_set_future_.get();
  return test_set_;
}

void Trainer::BuildModel() {
  torch::manual_seed(o_.seed);
  ResNetConfig config;
  config.arch = o_.model;
  config.imagenet_stem = o_.stem == "imagenet";
  config.num_classes = o_.num_classes;
  config.width = o_.width;
  config.batch_norm = o_.batch_norm;
  model_ = ResNet(config);
  model_->to(device_);
  if (channels_last_) {
    torch::NoGradGuard no_grad;
    for (auto& p : model_->parameters()) {
      if (p.dim() == 4) p.set_data(p.data().contiguous(torch::MemoryFormat::ChannelsLast));
    }
  }
  params_ = model_->parameters();
  buffers_ = model_->buffers();

  // Weight decay on everything, or (--no_decay_bn_bias) not on 1-D tensors: biases and
  // BatchNorm scales and shifts.
  auto options = torch::optim::SGDOptions(o_.lr)
                     .momentum(o_.momentum)
                     .nesterov(o_.nesterov)
                     .weight_decay(o_.weight_decay);
  std::vector<torch::optim::OptimizerParamGroup> groups;
  if (o_.no_decay_bn_bias) {
    std::vector<torch::Tensor> decay, no_decay;
    for (auto& p : params_) (p.dim() <= 1 ? no_decay : decay).push_back(p);
    auto no_decay_options = std::make_unique<torch::optim::SGDOptions>(options);
    no_decay_options->weight_decay(0);
    groups.emplace_back(decay, std::make_unique<torch::optim::SGDOptions>(options));
    groups.emplace_back(no_decay, std::move(no_decay_options));
  } else {
    groups.emplace_back(params_, std::make_unique<torch::optim::SGDOptions>(options));
  }
  optimizer_ = std::make_unique<torch::optim::SGD>(std::move(groups), options);
}

// Finds the newest state any rank holds, in memory (a worker kept through an in-process restart)
// or in a checkpoint it can see, and sends it from there to every rank: a kept worker's memory
// wins over any checkpoint, so no completed step is lost; restarts work without a shared file
// system. Ties go to the lowest rank.
void Trainer::Restore() {
  const bool want = !o_.ckpt_dir.empty() && (id_.restart_count > 0 || o_.resume);
  // Read once: the progress decides the source rank, and the source loads the same file.
  std::unique_ptr<CheckpointFile> local;
  if (!have_state_ && want) local = CheckpointFile::Open(o_.ckpt_dir, *model_);
  std::optional<TrainingProgress> candidate;
  if (have_state_) {
    candidate = completed_;
  } else if (local) {
    candidate = local->progress();
  }
  const int world = id_.world_size;
  int source = candidate ? id_.rank : -1;
  bool source_in_memory = have_state_;
  if (comm_) {
    // Slot r: rank r's samples seen + 1 (0: no state), and whether it is in memory; summed.
    auto seen = torch::zeros({2, world}, torch::kInt64);
    if (candidate) {
      seen[0][id_.rank] = candidate->samples_seen + 1;
      seen[1][id_.rank] = have_state_ ? 1 : 0;
    }
    seen = seen.to(comm_->device());
    comm_->AllReduceSum(seen)->Wait();
    seen = seen.cpu();
    source = -1;
    std::int64_t best = 0;
    for (int r = 0; r < world; ++r) {
      // Memory beats a checkpoint of the same progress (it is the same state, already loaded).
      const std::int64_t v = seen[0][r].item<std::int64_t>() * 2 + seen[1][r].item<std::int64_t>();
      if (v > best) best = v, source = r;
    }
    source_in_memory = source >= 0 && seen[1][source].item<std::int64_t>() == 1;
  }
  std::vector<torch::Tensor> state = params_;
  state.insert(state.end(), buffers_.begin(), buffers_.end());
  if (source < 0) {
    // Fresh start: every rank begins with rank 0's weights, as DDP's constructor does.
    if (comm_) comm_->Broadcast(state, 0);
    restored_from_ = "none";
    have_state_ = true;
    completed_ = progress_;
    StartTensorBoardSession();
    return;
  }
  if (id_.rank == source) {
    if (have_state_) {
      progress_ = completed_;
    } else {
      local->LoadInto(*model_, *optimizer_);
      progress_ = local->progress();
    }
  }
  local.reset();  // the other ranks' copies are not needed: the source broadcasts
  if (comm_) {
    // Progress, weights, buffers and momentum buffers from the source rank.
    auto numbers = torch::tensor({progress_.epoch, progress_.samples_in_epoch,
                                  progress_.samples_seen, progress_.step, progress_.world_size},
                                 torch::kInt64)
                       .to(comm_->device());
    auto scale = torch::tensor({progress_.loss_scale}, torch::kFloat64).to(comm_->device());
    comm_->Broadcast({numbers, scale}, source);
    numbers = numbers.cpu();
    scale = scale.cpu();
    progress_.epoch = numbers[0].item<std::int64_t>();
    progress_.samples_in_epoch = numbers[1].item<std::int64_t>();
    progress_.samples_seen = numbers[2].item<std::int64_t>();
    progress_.step = numbers[3].item<std::int64_t>();
    progress_.world_size = numbers[4].item<std::int64_t>();
    progress_.loss_scale = scale[0].item<double>();
    if (o_.momentum > 0) {
      for (auto& p : params_) state.push_back(MomentumBuffer(*optimizer_, p));
    }
    comm_->Broadcast(state, source);
  }
  if (progress_.loss_scale > 0) scaler_.scale = progress_.loss_scale;
  have_state_ = true;
  completed_ = progress_;
  restored_from_ = source_in_memory ? "memory" : "checkpoint";
  StartTensorBoardSession();
  if (source_in_memory) {
    Say("took the state of rank %d's memory: epoch %lld, step %lld, %lld samples seen (world "
        "size %d)",
        source, static_cast<long long>(progress_.epoch + 1),
        static_cast<long long>(progress_.step), static_cast<long long>(progress_.samples_seen),
        id_.world_size);
  } else {
    Say("resumed from the checkpoint of rank %d: epoch %lld, step %lld, %lld samples seen "
        "(written at world size %lld, now %d)",
        source, static_cast<long long>(progress_.epoch + 1),
        static_cast<long long>(progress_.step), static_cast<long long>(progress_.samples_seen),
        static_cast<long long>(progress_.world_size), id_.world_size);
  }
  metrics_->Append({{"event", "resume"},
                    {"from", restored_from_},
                    {"step", progress_.step},
                    {"epoch", progress_.epoch},
                    {"samples_seen", progress_.samples_seen},
                    {"from_world_size", progress_.world_size},
                    {"world_size", id_.world_size},
                    {"restart_count", id_.restart_count}});
}

BatchAllocator Trainer::Allocator() {
  const bool pin = device_.is_cuda();
  return [pin](std::int64_t n) {
    auto t = std::make_shared<BatchTensors>();
    auto options = torch::TensorOptions().pinned_memory(pin);
    t->images = torch::empty({n, kImageChannels, kImageSide, kImageSide}, options.dtype(torch::kFloat));
    t->labels = torch::empty({n}, options.dtype(torch::kInt64));
    BatchStorage storage;
    storage.images = t->images.data_ptr<float>();
    storage.labels = t->labels.data_ptr<std::int64_t>();
    storage.owner = t;
    return storage;
  };
}

std::pair<torch::Tensor, torch::Tensor> Trainer::ToDevice(const Batch& batch) {
  auto* t = static_cast<BatchTensors*>(batch.storage.owner.get());
  torch::Tensor images = t->images.narrow(0, 0, batch.size);
  torch::Tensor labels = t->labels.narrow(0, 0, batch.size);
  if (device_.is_cuda()) {
    images = images.to(device_, /*non_blocking=*/true);
    labels = labels.to(device_, /*non_blocking=*/true);
  }
  if (channels_last_) images = images.contiguous(torch::MemoryFormat::ChannelsLast);
  return {images, labels};
}

TallyResult Trainer::Reduce(const Tally& tally) {
  auto sums = torch::stack({tally.loss_sum, tally.correct.to(torch::kFloat64),
                            torch::full({}, static_cast<double>(tally.count),
                                        tally.loss_sum.options())});
  if (comm_) {
    sums = sums.to(comm_->device());
    comm_->AllReduceSum(sums)->Wait();
  }
  sums = sums.cpu();
  TallyResult r;
  r.count = static_cast<std::int64_t>(sums[2].item<double>());
  if (r.count > 0) {
    r.loss = sums[0].item<double>() / r.count;
    r.accuracy = sums[1].item<double>() / r.count;
  }
  return r;
}

TallyResult Trainer::Evaluate() {
  // Exact sharding of the test split: rank r takes r, r + W, r + 2W, ... with no padding.
  std::vector<std::int64_t> shard;
  const ImageSet& test_set = TestSet();
  for (std::int64_t i = id_.rank; i < test_set.size(); i += id_.world_size) shard.push_back(i);
  // Every rank evaluates with rank 0's BatchNorm statistics. (Training needs no such sync: in
  // train mode BatchNorm normalises with the batch's own statistics, so the running ones that
  // drift apart between ranks are read only here and in rank 0's checkpoints.)
  if (comm_ && !buffers_.empty()) comm_->Broadcast(buffers_, 0);
  model_->eval();
  torch::NoGradGuard no_grad;
  Tally tally(device_);
  BatchLoader loader(test_set, std::move(shard), o_.batch_size, AugmentConfig{}, o_.loader_threads,
                     4, Allocator());
  while (auto batch = loader.Next()) {
    auto [images, labels] = ToDevice(*batch);
    torch::Tensor logits;
    {
      AutocastScope autocast(amp_, amp_dtype_);
      logits = model_->forward(images);
    }
    auto loss = torch::nn::functional::cross_entropy(
        logits.to(torch::kFloat), labels,
        torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum));
    BatchScore(logits, labels, loss).AddTo(tally);
    heartbeat_->Beat();
  }
  model_->train();
  return Reduce(tally);
}

void Trainer::Checkpoint() {
  if (o_.ckpt_dir.empty() || id_.rank != 0) return;
  progress_.world_size = id_.world_size;
  progress_.loss_scale = scaler_.enabled ? scaler_.scale : 0;
  // A large checkpoint on a slow disk can take longer than --hang_timeout: not a hang.
  Heartbeat::KeepAlive alive(*heartbeat_, std::chrono::seconds(1));
  SaveCheckpoint(o_.ckpt_dir, *model_, *optimizer_, progress_);
}

void Trainer::TrainEpoch(std::int64_t epoch) {
  std::vector<std::int64_t> shard = ShardIndices(sampler_, epoch);
  // Resuming mid-epoch: the epoch's order does not depend on the world size, and the first
  // samples_in_epoch positions of it are done; each rank skips its share of them.
  const std::int64_t skip =
      std::min<std::int64_t>(progress_.samples_in_epoch / id_.world_size, shard.size());
  shard.erase(shard.begin(), shard.begin() + skip);

  AugmentConfig augment;
  augment.crop_and_flip = o_.augment;
  augment.seed = o_.seed;
  augment.epoch = epoch;
  BatchLoader loader(train_set_, std::move(shard), o_.batch_size, augment, o_.loader_threads, 4,
                     Allocator());
  const std::int64_t batches = loader.num_batches();
  Tally epoch_tally(device_), window_tally(device_);
  auto window_start = Clock::now();
  std::int64_t window_samples = 0;
  const auto epoch_start = Clock::now();
  const std::int64_t epoch_total = SamplesPerRank(sampler_) * id_.world_size;
  std::int64_t consumed_local = skip;  // this rank's position in its shard
  std::int64_t step_start_seen = progress_.samples_seen;
  double lr = schedule_.At(static_cast<double>(step_start_seen) / train_set_.size());
  int micro = 0;
  model_->train();
  while (auto batch = loader.Next()) {
    // A re-formed group is waiting (mxrun's in-process restart): leave this group now, between
    // steps, rather than at its next collective.
    if (micro == 0 && control_ && control_->RoundPending()) throw CollectiveInterrupted();
    auto [images, labels] = ToDevice(*batch);
    const bool last_micro = micro == o_.grad_accum - 1 || batch->number == batches - 1;
    torch::Tensor logits;
    {
      AutocastScope autocast(amp_, amp_dtype_);
      logits = model_->forward(images);
    }
    auto loss_sum = torch::nn::functional::cross_entropy(
        logits.to(torch::kFloat), labels,
        torch::nn::functional::CrossEntropyFuncOptions()
            .reduction(torch::kSum)
            .label_smoothing(o_.label_smoothing));
    torch::Tensor loss = loss_sum / static_cast<double>(batch->size * o_.grad_accum);
    if (scaler_.enabled) loss = loss * scaler_.scale;
    reducer_->PrepareForBackward(last_micro);
    loss.backward();
    const BatchScore score(logits, labels, loss_sum);
    score.AddTo(epoch_tally);
    score.AddTo(window_tally);
    window_samples += batch->size * id_.world_size;
    progress_.samples_seen += batch->size * id_.world_size;
    consumed_local += batch->size;
    if (!last_micro) {
      ++micro;
      continue;
    }
    micro = 0;
    reducer_->FinishBackward();
    const bool step_ok = !scaler_.enabled || scaler_.Unscale(params_);
    if (o_.clip_grad_norm > 0) ClipGradNorm(params_, o_.clip_grad_norm);
    lr = schedule_.At(static_cast<double>(step_start_seen) / train_set_.size());
    for (auto& group : optimizer_->param_groups()) {
      static_cast<torch::optim::SGDOptions&>(group.options()).lr(lr);
    }
    if (step_ok) ForeachSgdStep(*optimizer_);
    reducer_->ZeroGrad();
    ++progress_.step;
    heartbeat_->Beat();  // the first beat comes after the first step: start-up is not judged
    step_start_seen = progress_.samples_seen;
    progress_.samples_in_epoch = std::min(consumed_local * id_.world_size, epoch_total);
    progress_.world_size = id_.world_size;
    completed_ = progress_;  // what a kept worker gives the re-formed group
    if (id_.rank == 0 && !o_.ckpt_dir.empty()) {
      if (!marker_) {
        marker_ = std::make_unique<ProgressMarker>(ProgressMarkerPath(o_.ckpt_dir), id_.run_id);
      }
      marker_->Record(progress_.step);
    }
    if (failure_time_ > 0) RecordRecovery();
    if (control_ && !joined_) {
      // Training in this round: once every worker says so, the agent starts its standbys (not
      // sooner, so that a spare's start never slows the group's first step).
      control_->Joined(round_);
      joined_ = true;
    }
    if (o_.log_every > 0 && progress_.step % o_.log_every == 0) {
      const TallyResult r = Reduce(window_tally);
      const double rate = window_samples / std::max(SecondsSince(window_start), 1e-9);
      Say("epoch %lld/%d step %lld/%lld loss %.4f acc %.2f%% lr %.5f %.0f img/s",
          static_cast<long long>(epoch + 1), o_.epochs, static_cast<long long>(progress_.step),
          static_cast<long long>(planned_steps_), r.loss, 100 * r.accuracy, lr, rate);
      metrics_->Append({{"event", "step"},
                        {"epoch", epoch},
                        {"step", progress_.step},
                        {"loss", r.loss},
                        {"accuracy", r.accuracy},
                        {"lr", lr},
                        {"images_per_sec", rate},
                        {"world_size", id_.world_size}});
      window_tally = Tally(device_);
      window_samples = 0;
      window_start = Clock::now();
    }
    // Every --ckpt_every steps, except where the end-of-epoch checkpoint follows at once.
    const bool epoch_ends = progress_.samples_in_epoch >= epoch_total || Done();
    if (o_.ckpt_every > 0 && progress_.step % o_.ckpt_every == 0 && !epoch_ends) Checkpoint();
    if (Done()) break;
  }
  const double train_seconds = SecondsSince(epoch_start);
  const TallyResult train = Reduce(epoch_tally);
  const double rate = train.count / std::max(train_seconds, 1e-9);
  if (progress_.samples_in_epoch >= epoch_total) {
    progress_.epoch = epoch + 1;
    progress_.samples_in_epoch = 0;
    completed_ = progress_;
  }
  nlohmann::json record{{"event", "epoch"},
                        {"epoch", epoch},
                        {"step", progress_.step},
                        {"samples_seen", progress_.samples_seen},
                        {"train_loss", train.loss},
                        {"train_accuracy", train.accuracy},
                        {"images_per_sec", rate},
                        {"train_seconds", train_seconds},
                        {"lr", lr},
                        {"world_size", id_.world_size}};
  std::string eval_text;
  if (o_.eval) {
    const TallyResult test = Evaluate();
    record["test_loss"] = test.loss;
    record["test_accuracy"] = test.accuracy;
    record["test_samples"] = test.count;
    char text[96];
    std::snprintf(text, sizeof(text), " | test loss %.4f acc %.2f%% (%lld images)", test.loss,
                  100 * test.accuracy, static_cast<long long>(test.count));
    eval_text = text;
  }
  Say("epoch %lld/%d done: step %lld train loss %.4f acc %.2f%% %.0f img/s%s",
      static_cast<long long>(epoch + 1), o_.epochs, static_cast<long long>(progress_.step),
      train.loss, 100 * train.accuracy, rate, eval_text.c_str());
  metrics_->Append(record);
  Checkpoint();
}

// How long a worker whose collective failed waits for mxrun's notice of the re-formed group
// before it gives up and exits (and is restarted the old way). A peer's death reaches the agents
// at once (a closed stream or child exit); a silent node is declared dead after its lease (5 s by
// default), so this leaves room for that.
constexpr std::chrono::seconds kRoundNoticeWait{15};

Trainer::~Trainer() {
  // A loading task may still run when training failed early; wait for it before its target goes.
  if (test_set_future_.valid()) test_set_future_.wait();
}

void Trainer::OpenMetrics() {
  // Only rank 0 writes metrics: the other ranks' logs drop every record.
  metrics_ = std::make_unique<MetricsLog>(id_.rank == 0 ? o_.metrics_file : "");
#if defined(MXRUN_WITH_TENSORBOARD)
  tensorboard_.reset();
  if (id_.rank == 0 && !o_.tensorboard_dir.empty()) {
    auto writer = std::make_shared<TensorBoardWriter>(o_.tensorboard_dir, metrics_->Now());
    tensorboard_ = writer;
    metrics_->AddSink([writer](const nlohmann::json& record) {
      writer->Write(record.value("step", std::int64_t{0}), record["time"].get<double>(),
                    ScalarsOfRecord(record));
    });
    Say("train: TensorBoard events in %s", writer->path().c_str());
  }
#endif
}

// The state is known: rank 0's event file starts at the next step. After a restart from a
// checkpoint (or from scratch) that step was trained before, and TensorBoard, told so, shows only
// the new values; a kept worker's file has started already.
void Trainer::StartTensorBoardSession() {
#if defined(MXRUN_WITH_TENSORBOARD)
  if (tensorboard_) tensorboard_->StartSession(progress_.step + 1, metrics_->Now());
#endif
}

// One round of the group: join it, agree on the state, train to the end. Throws CollectiveError
// when the group breaks (a peer is gone, or mxrun re-forms it).
void Trainer::RunRound() {
  if (id_.world_size > 1 || o_.backend != "auto") {
    comm_ = JoinProcessGroup(
        id_, backend_, device_,
        std::chrono::milliseconds(static_cast<std::int64_t>(o_.timeout_seconds * 1000)));
    if (control_) {
      ControlChannel* control = control_.get();
      comm_->SetInterrupt([control] { return control->RoundPending(); });
    }
  }
  Restore();
  if (train_set_future_.valid()) train_set_ = train_set_future_.get();  // rethrows a reader's error
  reducer_ = std::make_unique<GradientReducer>(
      params_, comm_.get(), kDefaultFirstBucketBytes,
      static_cast<std::int64_t>(o_.bucket_cap_mb * 1024 * 1024));

  sampler_ = SamplerConfig{train_set_.size(), id_.world_size, id_.rank, true, o_.seed, false};
  const std::int64_t batches = (SamplesPerRank(sampler_) + o_.batch_size - 1) / o_.batch_size;
  const std::int64_t steps_per_epoch = (batches + o_.grad_accum - 1) / o_.grad_accum;
  planned_steps_ = steps_per_epoch * o_.epochs;
  if (o_.max_steps > 0) planned_steps_ = std::min(planned_steps_, o_.max_steps);
  schedule_.base_lr = o_.lr;
  schedule_.warmup_epochs = o_.warmup_epochs;
  schedule_.total_epochs = o_.epochs;
  schedule_.kind = o_.schedule;
  schedule_.milestones = o_.milestones;
  schedule_.gamma = o_.gamma;

  if (!started_) {
    started_ = true;
    // (The test split may still be loading: its size is reported with its evaluation.)
    Say("train: %s (%lld parameters, %s stem) on %s, %d worker(s), backend %s, %lld training "
        "images (%s; test split %s), batch %lld per worker, %lld steps per epoch",
        o_.model.c_str(), static_cast<long long>(CountParameters(*model_)), o_.stem.c_str(),
        device_.str().c_str(), id_.world_size, BackendName(backend_).c_str(),
        static_cast<long long>(train_set_.size()),
        o_.data_dir.empty() ? "synthetic" : o_.data_dir.c_str(),
        o_.eval ? "evaluated after each epoch" : "not evaluated",
        static_cast<long long>(o_.batch_size), static_cast<long long>(steps_per_epoch));
    metrics_->Append({{"event", "start"},
                      {"model", o_.model},
                      {"parameters", CountParameters(*model_)},
                      {"device", device_.str()},
                      {"world_size", id_.world_size},
                      {"backend", BackendName(backend_)},
                      {"restart_count", id_.restart_count},
                      {"steps_per_epoch", steps_per_epoch},
                      {"planned_steps", planned_steps_}});
  }

  for (std::int64_t epoch = progress_.epoch; epoch < o_.epochs && !Done(); ++epoch) {
    TrainEpoch(epoch);
  }
  if (comm_) comm_->Barrier();
}

// Takes a re-formed group's round without exiting: the broken group is abandoned, the gradients
// of the step in flight are dropped, and the progress goes back to the last completed step.
void Trainer::ApplyRound(const RoundNotice& notice, const std::string& why) {
  const int old_rank = id_.rank;
  for (const auto& [key, value] : notice.env) setenv(key.c_str(), value.c_str(), 1);
  id_ = ReadWorkerIdentity(EnvFromStrings(environ));
  const std::string who = have_state_ ? "rank " + std::to_string(old_rank) : "standby";
  std::fprintf(stderr, "train: %s: %s; taking round %d in-process as rank %d of %d\n",
               who.c_str(), why.c_str(), notice.round, id_.rank, id_.world_size);
  reducer_.reset();  // removes its hooks
  if (comm_) abandoned_.push_back(comm_.release());
  {
    torch::NoGradGuard no_grad;
    for (auto& p : params_) p.mutable_grad() = torch::Tensor();
  }
  if (failure_time_ == 0) {
    failure_time_ = notice.failure_time > 0 ? notice.failure_time : SystemWallClock();
    if (have_state_) failed_at_step_ = completed_.step;
  }
  progress_ = completed_;
  round_ = notice.round;
  joined_ = false;
  if (!metrics_ || (old_rank == 0) != (id_.rank == 0)) OpenMetrics();
  if (heartbeat_->path() != id_.heartbeat_file) {
    heartbeat_ = std::make_unique<Heartbeat>(id_.heartbeat_file);
  }
}

// One forward and backward pass on a batch of zeros, results dropped: a process's first pass
// pays for kernel selection and memory that later ones reuse (its first step ran at about 60% of
// the speed of the next ones here). A standby pays it before it is needed. BatchNorm's running
// statistics it moves are replaced by the group's in Restore.
void Trainer::WarmUp() {
  auto images = torch::zeros({o_.batch_size, kImageChannels, kImageSide, kImageSide},
                             torch::TensorOptions().device(device_));
  if (channels_last_) images = images.contiguous(torch::MemoryFormat::ChannelsLast);
  torch::Tensor logits;
  {
    AutocastScope autocast(amp_, amp_dtype_);
    logits = model_->forward(images);
  }
  logits.to(torch::kFloat).sum().backward();
  torch::NoGradGuard no_grad;
  for (auto& p : params_) p.mutable_grad() = torch::Tensor();
}

// A warm standby (MXRUN_STANDBY=1): everything that does not depend on a rank is done (LibTorch
// loaded, data made, model built), then it waits for mxrun to give it a failed rank's place.
// Returns false when the agent closed the channel instead (the job ended).
bool Trainer::WaitAsStandby() {
  train_set_ = train_set_future_.get();
  WarmUp();
  control_->Hello();
  for (;;) {
    std::optional<RoundNotice> notice = control_->TakeRound(std::chrono::hours(1));
    if (notice) {
      ApplyRound(*notice, "a standby was given a rank");
      break;
    }
    if (control_->closed()) return false;
  }
  // Its device follows from its local rank, known only now.
  const torch::Device device = ChooseDevice(o_, id_);
  if (device != device_) {
    device_ = device;
    model_->to(device_);
  }
  return true;
}

// The first step completed after a restart: how much it cost.
void Trainer::RecordRecovery() {
  nlohmann::json record{{"event", "recovery"},
                        {"step", progress_.step},
                        {"seconds_lost", metrics_->Now() - failure_time_},
                        {"restored_from", restored_from_},
                        {"world_size", id_.world_size},
                        {"restart_count", id_.restart_count}};
  if (failed_at_step_ >= 0) {
    // Steps completed before the failure that the group had to train again.
    record["steps_redone"] = std::max<std::int64_t>(0, failed_at_step_ - (progress_.step - 1));
  } else if (restored_from_ == "memory") {
    record["steps_redone"] = 0;  // a kept worker's state: the most advanced one of the group
  }
  metrics_->Append(record);
  failure_time_ = 0;
  failed_at_step_ = -1;
}

int Trainer::Run() {
  const auto start = Clock::now();
  // Intra-op threads: --threads, else OMP_NUM_THREADS (launchers set 1 per worker), else this
  // node's cores shared among its workers (LibTorch alone would use just one here).
  int threads = o_.threads;
  if (threads == 0) {
    const char* omp = std::getenv("OMP_NUM_THREADS");
    const int from_env = omp != nullptr ? std::atoi(omp) : 0;
    const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    threads = from_env > 0 ? from_env : std::max(1, cores / id_.local_world_size);
  }
  torch::set_num_threads(threads);

  device_ = ChooseDevice(o_, id_);
  backend_ = ChooseBackend(o_, device_);
  channels_last_ = o_.channels_last.value_or(device_.is_cuda());
  // Every batch has the same shape (but the last), so cuDNN's per-shape autotuning pays off.
  if (device_.is_cuda()) at::globalContext().setBenchmarkCuDNN(o_.cudnn_benchmark);
  if (o_.amp != "off" && !device_.is_cuda()) {
    throw std::runtime_error("--amp " + o_.amp + " needs a CUDA device");
  }
  amp_ = o_.amp != "off";
  amp_dtype_ = o_.amp == "fp16" ? at::kHalf : at::kBFloat16;
  scaler_.enabled = o_.amp == "fp16";
  const char* standby_flag = std::getenv("MXRUN_STANDBY");
  const bool standby = standby_flag != nullptr && std::string(standby_flag) == "1";
  // mxrun offers a control channel: this trainer takes a re-formed group's round in-process.
  if (o_.in_process_restart) control_ = ControlChannel::FromEnvironment(EnvFromStrings(environ));
  if (standby && !control_) {
    std::fprintf(stderr, "train: started as a standby, but %s; nothing to do\n",
                 o_.in_process_restart ? "without mxrun's control channel (MXRUN_CONTROL_FD)"
                                       : "--no_in_process_restart was given");
    return 0;
  }
  if (control_ && !standby) control_->Hello();
  if (!standby) OpenMetrics();
  // A process started for a round that follows a failure: the recovery record counts from it.
  if (const char* t = std::getenv("MXRUN_FAILURE_TIME"); t != nullptr) {
    failure_time_ = std::atof(t);
    // Where the group stood when it failed, for the steps the checkpoint makes it redo. Read
    // before this process's first step rewrites the marker.
    if (failure_time_ > 0 && id_.rank == 0 && !o_.ckpt_dir.empty()) {
      failed_at_step_ =
          ReadProgressMarker(ProgressMarkerPath(o_.ckpt_dir), id_.run_id).value_or(-1);
    }
  }
  if (const char* r = std::getenv("MXRUN_ROUND"); r != nullptr) round_ = std::atoi(r);

  StartLoadingData(threads);
  BuildModel();
  if (standby && !WaitAsStandby()) return 0;
  heartbeat_ = std::make_unique<Heartbeat>(id_.heartbeat_file);
  for (;;) {
    try {
      RunRound();
      break;
    } catch (const CollectiveError& e) {
      // Without mxrun's channel, or without a notice in time, this is a plain failure: exit and
      // be restarted with the group (the old way).
      if (!control_) throw;
      std::optional<RoundNotice> notice = control_->TakeRound(kRoundNoticeWait);
      if (!notice) throw;
      ApplyRound(*notice, e.what());
    }
  }
  Say("train: finished at step %lld after %.1f s", static_cast<long long>(progress_.step),
      SecondsSince(start));
  ReportMemory();
  metrics_->Append({{"event", "done"},
                    {"step", progress_.step},
                    {"samples_seen", progress_.samples_seen},
                    {"seconds", SecondsSince(start)}});
  return 0;
}

// Rank 0's peak GPU memory, as torch.cuda.max_memory_allocated / max_memory_reserved report it.
void Trainer::ReportMemory() {
#if defined(MXRUN_WITH_CUDA)
  if (!device_.is_cuda()) return;
  const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(device_.index());
  constexpr std::size_t kAllPools = 0;  // StatType::AGGREGATE
  constexpr double kMiB = 1024.0 * 1024.0;
  const double allocated = static_cast<double>(stats.allocated_bytes[kAllPools].peak) / kMiB;
  const double reserved = static_cast<double>(stats.reserved_bytes[kAllPools].peak) / kMiB;
  Say("train: peak GPU memory %.0f MiB allocated, %.0f MiB reserved", allocated, reserved);
  metrics_->Append(
      {{"event", "memory"}, {"max_allocated_mib", allocated}, {"max_reserved_mib", reserved}});
#endif
}

}  // namespace

int RunTrainer(const TrainerOptions& options, const WorkerIdentity& identity) {
  Trainer trainer(options, identity);
  return trainer.Run();
}

}  // namespace mxrun::trainer
