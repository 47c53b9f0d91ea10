// The training run and its epoch loop: data, model, the agreed state (Restore), steps with
// gradient accumulation, evaluation, metrics and checkpoints. Two mechanisms live beside it in
// files of their own: mixed precision (mixed_precision.cc) and the in-process recovery protocol
// with mxrun's agent (recovery.cc), both acting on the Trainer declared in trainer_internal.h.
#include "trainer/trainer.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <optional>
#include <stdexcept>
#include <thread>

#include <ATen/Context.h>
#include <torch/cuda.h>
#include <torch/nn/functional/loss.h>
#include <torch/optim/sgd.h>
#if defined(MXRUN_WITH_CUDA)
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#endif

#include "trainer/batch_loader.h"
#include "trainer/checkpoint.h"
#include "trainer/cifar10.h"
#include "trainer/collectives.h"
#include "trainer/control_channel.h"
#include "trainer/distributed_sampler.h"
#include "trainer/gradient_reducer.h"
#include "trainer/heartbeat.h"
#include "trainer/lr_schedule.h"
#include "trainer/metrics_log.h"
#include "trainer/mixed_precision.h"
#include "trainer/progress_marker.h"
#include "trainer/resnet.h"
#include "trainer/sgd.h"
#include "trainer/state_digest.h"
#include "trainer/synthetic_data.h"
#include "trainer/trainer_internal.h"
#if defined(MXRUN_WITH_TENSORBOARD)
#include "trainer/tensorboard_writer.h"
#endif

extern char** environ;

namespace mxrun::trainer {

// Why `what` cannot be had here: this build has no CUDA, or no GPU is visible to this process.
static std::string NoGpuReason(const std::string& what) {
#if defined(MXRUN_WITH_CUDA)
  return what + ": no CUDA GPU is visible to this process (CUDA_VISIBLE_DEVICES='" +
         std::string(std::getenv("CUDA_VISIBLE_DEVICES") ? std::getenv("CUDA_VISIBLE_DEVICES")
                                                         : "<unset>") +
         "'; no driver, or no GPU): run on a GPU machine, or use --device cpu --backend gloo";
#else
  return what +
         ": this train was built against a CPU-only LibTorch; use --device cpu --backend "
         "gloo, or build against a CUDA PyTorch (scripts/gpu/build-trainer-cuda.sh)";
#endif
}

torch::Device ChooseDevice(const TrainerOptions& o, const WorkerIdentity& id) {
  if (o.device == "cpu") return torch::kCPU;
  const bool cuda = torch::cuda::is_available();
  if (o.device == "cuda" && !cuda) {
    throw UnmetRequest(NoGpuReason("--device cuda"));
  }
  if (!cuda) return torch::kCPU;
  const int index = id.local_rank % static_cast<int>(torch::cuda::device_count());
#if defined(MXRUN_WITH_CUDA)
  c10::cuda::set_device(static_cast<c10::DeviceIndex>(index));
#endif
  return torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(index));
}

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

struct TallyResult {
  double loss = 0;
  double accuracy = 0;
  std::int64_t count = 0;
};

namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

CommBackend ChooseBackend(const TrainerOptions& o, const torch::Device& device) {
  if (o.backend == "gloo") return CommBackend::kGloo;
  if (o.backend == "nccl") {
    if (!NcclAvailable()) {
      throw UnmetRequest(
          "--backend nccl: this train was built without NCCL (a CPU LibTorch); use --backend "
          "gloo, or build against a CUDA PyTorch (scripts/gpu/build-trainer-cuda.sh)");
    }
    if (!device.is_cuda()) throw UnmetRequest(NoGpuReason("--backend nccl"));
    return CommBackend::kNccl;
  }
  return device.is_cuda() && NcclAvailable() ? CommBackend::kNccl : CommBackend::kGloo;
}

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

// How long a worker whose collective failed waits for mxrun's notice of the re-formed group
// before it gives up and exits (and is restarted the old way). A peer's death reaches the agents
// at once (a closed stream or child exit); a silent node is declared dead after its lease (5 s by
// default), so this leaves room for that.
constexpr std::chrono::seconds kRoundNoticeWait{15};

}  // namespace

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
  test_set_future_ =
      std::async(std::launch::async, [this, make, train = std::move(train)]() mutable -> ImageSet {
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
    MarkCompleted();
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
  MarkCompleted();
  restored_from_ = source_in_memory ? "memory" : "checkpoint";
  StartTensorBoardSession();
  if (source_in_memory) {
    Say("took the state of rank %d's memory: epoch %lld, step %lld, %lld samples seen (world "
        "size %d)",
        source, static_cast<long long>(progress_.epoch + 1), static_cast<long long>(progress_.step),
        static_cast<long long>(progress_.samples_seen), id_.world_size);
  } else {
    Say("resumed from the checkpoint of rank %d: epoch %lld, step %lld, %lld samples seen "
        "(written at world size %lld, now %d)",
        source, static_cast<long long>(progress_.epoch + 1), static_cast<long long>(progress_.step),
        static_cast<long long>(progress_.samples_seen),
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
    t->images =
        torch::empty({n, kImageChannels, kImageSide, kImageSide}, options.dtype(torch::kFloat));
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
  auto sums =
      torch::stack({tally.loss_sum, tally.correct.to(torch::kFloat64),
                    torch::full({}, static_cast<double>(tally.count), tally.loss_sum.options())});
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

void Trainer::MarkCompleted() {
  completed_ = progress_;
  if (!control_ || buffers_.empty()) return;  // no in-process restart: nothing is put back
  torch::NoGradGuard no_grad;
  if (completed_buffers_.size() != buffers_.size()) {
    completed_buffers_.clear();
    for (const torch::Tensor& b : buffers_) completed_buffers_.push_back(b.detach().clone());
    return;
  }
  at::_foreach_copy_(completed_buffers_, buffers_);  // one multi-tensor copy, not one per buffer
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
  // An evaluation, a checkpoint or a restore since the last step is not a step's time.
  if (progress_report_) progress_report_->Restart();
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
    auto loss_sum =
        torch::nn::functional::cross_entropy(logits.to(torch::kFloat), labels,
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
    // The window's loss and accuracy over every rank, when this step is logged: reduced before
    // the step is applied, so that a peer lost in that collective leaves the step undone (it is
    // trained again, with the same loss) rather than applied but never logged.
    const bool log_now = o_.log_every > 0 && (progress_.step + 1) % o_.log_every == 0;
    std::optional<TallyResult> logged;
    if (log_now) logged = Reduce(window_tally);
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
    if (progress_report_) progress_report_->Step(progress_.step);
    step_start_seen = progress_.samples_seen;
    progress_.samples_in_epoch = std::min(consumed_local * id_.world_size, epoch_total);
    progress_.world_size = id_.world_size;
    MarkCompleted();  // what a kept worker gives the re-formed group
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
    if (logged) {
      const TallyResult& r = *logged;
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
    MarkCompleted();
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
  had_rank_ = !standby;
  // mxrun offers a control channel: this trainer takes a re-formed group's round in-process.
  if (o_.in_process_restart) control_ = ControlChannel::FromEnvironment(EnvFromStrings(environ));
  if (standby && !control_) {
    std::fprintf(stderr, "train: started as a standby, but %s; nothing to do\n",
                 o_.in_process_restart ? "without mxrun's control channel (MXRUN_CONTROL_FD)"
                                       : "--no_in_process_restart was given");
    return 0;
  }
  if (control_ && !standby) control_->Hello();
  // Progress reports go over the same channel whenever mxrun offers one.
  progress_report_ = ProgressReport::FromEnvironment(EnvFromStrings(environ));
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
  if (comm_) {
    try {
      comm_->Shutdown();
    } catch (const std::exception& e) {  // the training is done: say it, do not fail for it
      Say("train: ending the process group: %s", e.what());
    }
  }
  Say("train: finished at step %lld after %.1f s", static_cast<long long>(progress_.step),
      SecondsSince(start));
  ReportMemory();
  nlohmann::json done = {{"event", "done"},
                         {"step", progress_.step},
                         {"samples_seen", progress_.samples_seen},
                         {"seconds", SecondsSince(start)}};
  // The final state's digest, to compare runs bit for bit (a few tenths of a second for
  // ResNet-18's 11 M parameters and their momentum: only where it is written).
  if (id_.rank == 0 && !o_.metrics_file.empty()) {
    done["state_sha256"] = StateDigest(*model_, *optimizer_);
    done["weights_sha256"] = StateDigest(*model_, *optimizer_, /*with_buffers=*/false);
  }
  metrics_->Append(done);
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

int RunTrainer(const TrainerOptions& options, const WorkerIdentity& identity) {
  Trainer trainer(options, identity);
  return trainer.Run();
}

}  // namespace mxrun::trainer
