#pragma once
// The Trainer class, private to the trainer's own files: trainer.cc (data, model, restore,
// checkpoints and the epoch loop) and recovery.cc (the in-process recovery protocol: rounds,
// standbys, recovery records). One class because both mechanisms act on the same state: a round
// taken in-process keeps the model, the optimizer and the data. Include it from nowhere else; the
// trainer's interface is trainer.h.

#include <cstdint>
#include <cstdio>
#include <future>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/core/ScalarType.h>
#include <torch/optim/sgd.h>
#include <torch/types.h>

#include "common/control_protocol.h"
#include "common/worker_env.h"
#include "trainer/batch_loader.h"
#include "trainer/checkpoint.h"
#include "trainer/collectives.h"
#include "trainer/control_channel.h"
#include "trainer/distributed_sampler.h"
#include "trainer/gradient_reducer.h"
#include "trainer/heartbeat.h"
#include "trainer/image_set.h"
#include "trainer/lr_schedule.h"
#include "trainer/metrics_log.h"
#include "trainer/mixed_precision.h"
#include "trainer/options.h"
#include "trainer/progress_marker.h"
#include "trainer/progress_report.h"
#include "trainer/resnet.h"
#if defined(MXRUN_WITH_TENSORBOARD)
#include "trainer/tensorboard_writer.h"
#endif

namespace mxrun::trainer {

// The device this worker trains on: the CPU for --device cpu, else the GPU of its local rank
// (modulo the visible GPUs) when one is visible, else the CPU; a CUDA build makes that GPU the
// current device. Throws UnmetRequest (exit 2) for --device cuda without a visible GPU.
torch::Device ChooseDevice(const TrainerOptions& o, const WorkerIdentity& id);

struct Tally;        // trainer.cc
struct TallyResult;  // trainer.cc

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
  // trainer.cc: data, model, state, the epoch loop.
  void StartLoadingData(int threads);
  const ImageSet& TestSet();  // waits for it the first time
  void BuildModel();
  void Restore();
  void OpenMetrics();
  void StartTensorBoardSession();
  // recovery.cc: the in-process recovery protocol.
  void RunRound();
  void ApplyRound(const RoundNotice& notice, const std::string& why);
  // progress_ is a completed step's (or the restored state's): what a kept worker gives the
  // re-formed group, buffers included.
  void MarkCompleted();
  void RecordRecovery();
  bool WaitAsStandby();
  void WarmUp();
  // trainer.cc
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
  std::unique_ptr<ProgressReport> progress_report_;  // steps told to mxrun (null: no channel)
  bool have_state_ = false;     // the model holds a trained state all ranks agreed on
  bool had_rank_ = false;       // started with a rank, or a standby given one since
  TrainingProgress completed_;  // progress_ at the last completed optimizer step
  // buffers_ (BatchNorm's running statistics and counts) at that step, kept with an mxrun
  // channel: the forward of a step abandoned for a re-formed group moved them, and they are put
  // back (ApplyRound), so that a recovered run ends bit for bit where an undisturbed one does.
  std::vector<torch::Tensor> completed_buffers_;
  bool started_ = false;  // the start record is written once
  // Recovery under way: when the failure was seen (wall clock), where it stood (the last step
  // completed before it: from memory in-process, from the progress marker after a restart).
  double failure_time_ = 0;
  std::int64_t failed_at_step_ = -1;
  // Where a recovery's time goes (wall clock, 0: not yet): this process took the new round (a
  // notice in-process, or its start after a restart), joined its group, restored the state.
  double round_taken_at_ = 0, group_joined_at_ = 0, state_restored_at_ = 0;
  std::unique_ptr<ProgressMarker> marker_;  // rank 0's, with --ckpt_dir
  std::string restored_from_ = "none";      // "memory", "checkpoint" or "none" (last Restore)
  ImageSet train_set_, test_set_;
  std::future<ImageSet> train_set_future_;
  std::future<ImageSet>
      test_set_future_;  // the loading task: the test split after the training one
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
  int round_ = 0;        // the rendezvous round this worker is in (MXRUN_ROUND, then each notice)
  bool joined_ = false;  // told the agent it trains in round_
};

}  // namespace mxrun::trainer
