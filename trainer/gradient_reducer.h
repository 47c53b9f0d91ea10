#pragma once
// Data parallelism's gradient side, as PyTorch DDP's Reducer does it: gradients live in flat
// per-bucket buffers (each parameter's .grad is a view into its bucket), a hook on every
// parameter's gradient accumulator counts down its bucket during backward, and a full bucket's
// all-reduce starts at once, overlapping the rest of backward. FinishBackward waits for every
// bucket and divides by the world size, leaving the averaged gradient in .grad.

#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include <ATen/core/Tensor.h>

#include "trainer/collectives.h"

namespace torch::autograd {
struct Node;
}

namespace mxrun::trainer {

class GradientReducer {
 public:
  // `params` in registration order; `comm` may be null for a single process (no communication).
  GradientReducer(std::vector<at::Tensor> params, Collectives* comm,
                  std::int64_t first_bucket_bytes, std::int64_t bucket_bytes);
  ~GradientReducer();
  GradientReducer(const GradientReducer&) = delete;
  GradientReducer& operator=(const GradientReducer&) = delete;

  // Before each backward: whether this backward's gradients are to be all-reduced (false for the
  // first N-1 micro-batches of gradient accumulation, whose gradients only accumulate locally).
  void PrepareForBackward(bool reduce);
  // After the reducing backward: waits for all buckets and averages. Buckets whose gradients
  // never arrived (parameters unused by this forward) are reduced here, so ranks stay in step.
  void FinishBackward();
  // Zeroes the gradient buffers (replaces optimizer.zero_grad(), which would detach the views).
  void ZeroGrad();

  // For tests and diagnostics.
  const std::vector<std::vector<int>>& buckets() const { return buckets_; }
  // For each bucket, in launch order: how many parameters' gradients were still to come in the
  // same backward when that bucket's all-reduce was started.
  struct LaunchRecord {
    int bucket = 0;
    int gradients_pending = 0;
  };
  const std::vector<LaunchRecord>& last_launches() const { return launches_; }

 private:
  void OnGradientReady(int param);
  void Launch(int bucket);  // mutex_ held

  std::vector<at::Tensor> params_;
  Collectives* comm_;
  std::vector<std::vector<int>> buckets_;
  std::vector<at::Tensor> buffers_;  // one flat buffer per bucket
  std::vector<int> bucket_of_;       // param -> bucket
  // The gradient accumulators, kept alive (the hooks live there): a shared_ptr up to PyTorch 2.11,
  // an intrusive_ptr in 2.13, held here type-erased; accumulator_nodes_ are the same nodes.
  std::vector<std::shared_ptr<void>> accumulators_;
  std::vector<torch::autograd::Node*> accumulator_nodes_;
  std::vector<std::uintptr_t> hook_keys_;  // ours on each accumulator, removed at destruction

  std::mutex mutex_;
  bool reduce_ = false;
  int gradients_pending_ = 0;
  std::vector<int> pending_in_bucket_;
  std::vector<bool> seen_;
  std::vector<std::unique_ptr<PendingCollective>> in_flight_;  // by bucket
  std::vector<LaunchRecord> launches_;
};

}  // namespace mxrun::trainer
