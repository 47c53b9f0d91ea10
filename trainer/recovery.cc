// The trainer's in-process recovery protocol: how a worker takes a re-formed group's round without
// exiting, how a warm standby takes a failed rank's place, and what a recovery cost. Apart from the
// epoch loop (trainer.cc) because it is a protocol with mxrun's agent (control_channel.h), not a
// part of a training step. A worker is in one of three states:
//   standby     (MXRUN_STANDBY=1) data made, model built and warmed up, no rank; WaitAsStandby
//               waits on the control channel. A round notice gives it a failed rank's place
//               (ApplyRound) and it goes into that round; a closed channel ends it (the job ended).
//   in a round  RunRound joins the process group, agrees on the state (Restore) and trains to the
//               end. The first completed step tells the agent it trains in this round (Joined) and,
//               after a failure, writes the recovery record (RecordRecovery); both from TrainEpoch.
//   between     a collective failed, or was interrupted because a notice is pending
//               (CollectiveError). Run waits for the notice; ApplyRound abandons the broken group,
//               drops the step in flight, goes back to the last completed step, and the next round
//               starts. Without a control channel, or without a notice in time, the worker exits
//               and mxrun restarts the group the old way.
#include "trainer/trainer_internal.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>

#include <torch/types.h>
#include <torch/utils.h>
#include <nlohmann/json.hpp>

#include "common/worker_env.h"
#include "trainer/bucket_plan.h"

extern char** environ;

namespace mxrun::trainer {

// One round of the group: join it, agree on the state, train to the end. Throws CollectiveError
// when the group breaks (a peer is gone, or mxrun re-forms it).
void Trainer::RunRound() {
  if (failure_time_ > 0 && round_taken_at_ == 0) round_taken_at_ = SystemWallClock();
  if (id_.world_size > 1 || o_.backend != "auto") {
    std::function<bool()> round_pending;
    if (control_) {
      ControlChannel* control = control_.get();
      round_pending = [control] { return control->RoundPending(); };
    }
    comm_ = JoinProcessGroup(
        id_, backend_, device_,
        std::chrono::milliseconds(static_cast<std::int64_t>(o_.timeout_seconds * 1000)),
        round_pending);
    if (round_pending) comm_->SetInterrupt(round_pending);
  }
  group_joined_at_ = SystemWallClock();
  Restore();  // its first collective also creates an NCCL communicator (PyTorch makes them lazily)
  state_restored_at_ = SystemWallClock();
  if (train_set_future_.valid()) train_set_ = train_set_future_.get();  // rethrows a reader's error
  reducer_ =
      std::make_unique<GradientReducer>(params_, comm_.get(), kDefaultFirstBucketBytes,
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
  // A rank that had no state yet (kept while it waited for its group's) is still that rank.
  const std::string who = had_rank_ ? "rank " + std::to_string(old_rank) : "standby";
  had_rank_ = true;
  std::fprintf(stderr, "train: %s: %s; taking round %d in-process as rank %d of %d\n", who.c_str(),
               why.c_str(), notice.round, id_.rank, id_.world_size);
  reducer_.reset();  // removes its hooks
  if (comm_) abandoned_.push_back(comm_.release());
  {
    torch::NoGradGuard no_grad;
    for (auto& p : params_) p.mutable_grad() = torch::Tensor();
    // The abandoned step's forward moved BatchNorm's running statistics: back to the last
    // completed step's.
    if (have_state_ && completed_buffers_.size() == buffers_.size() && !buffers_.empty()) {
      at::_foreach_copy_(buffers_, completed_buffers_);
    }
  }
  if (failure_time_ == 0) {
    failure_time_ = notice.failure_time > 0 ? notice.failure_time : SystemWallClock();
    if (have_state_) failed_at_step_ = completed_.step;
  }
  round_taken_at_ = SystemWallClock();
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

// The first step completed after a restart: how much it cost, and where the time went (as this
// rank saw it): until it had the new round (the failure seen, the group re-formed and the notice
// taken; in a process started for the round, its whole start-up), joining the group, agreeing on
// and restoring the state (which creates an NCCL communicator), the first step.
void Trainer::RecordRecovery() {
  const double now = metrics_->Now();
  nlohmann::json record{{"event", "recovery"},
                        {"step", progress_.step},
                        {"seconds_lost", now - failure_time_},
                        {"restored_from", restored_from_},
                        {"world_size", id_.world_size},
                        {"restart_count", id_.restart_count}};
  if (failed_at_step_ >= 0) {
    // Steps completed before the failure that the group had to train again.
    record["steps_redone"] = std::max<std::int64_t>(0, failed_at_step_ - (progress_.step - 1));
  } else if (restored_from_ == "memory") {
    record["steps_redone"] = 0;  // a kept worker's state: the most advanced one of the group
  }
  if (round_taken_at_ > 0 && group_joined_at_ >= round_taken_at_ &&
      state_restored_at_ >= group_joined_at_) {
    record["phases"] = {{"until_round", round_taken_at_ - failure_time_},
                        {"join", group_joined_at_ - round_taken_at_},
                        {"restore", state_restored_at_ - group_joined_at_},
                        {"first_step", now - state_restored_at_}};
  }
  metrics_->Append(record);
  failure_time_ = 0;
  failed_at_step_ = -1;
  round_taken_at_ = group_joined_at_ = state_restored_at_ = 0;
}

}  // namespace mxrun::trainer
