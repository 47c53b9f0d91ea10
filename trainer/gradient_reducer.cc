#include "trainer/gradient_reducer.h"

#include <stdexcept>

#include <ATen/ATen.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/utils/lambda_post_hook.h>
#include <torch/csrc/autograd/variable.h>

#include "trainer/bucket_plan.h"

namespace mxrun::trainer {

GradientReducer::GradientReducer(std::vector<at::Tensor> params, Collectives* comm,
                                 std::int64_t first_bucket_bytes, std::int64_t bucket_bytes)
    : params_(std::move(params)), comm_(comm) {
  std::vector<ParamInfo> infos;
  std::vector<std::pair<at::ScalarType, at::Device>> kinds;
  for (const at::Tensor& p : params_) {
    if (!p.is_non_overlapping_and_dense()) {
      throw std::invalid_argument("GradientReducer needs dense parameters");
    }
    const auto kind = std::make_pair(p.scalar_type(), p.device());
    auto it = std::find(kinds.begin(), kinds.end(), kind);
    if (it == kinds.end()) it = kinds.insert(kinds.end(), kind);
    infos.push_back({static_cast<std::int64_t>(p.numel() * p.element_size()),
                     static_cast<int>(it - kinds.begin())});
  }
  buckets_ = PlanBuckets(infos, first_bucket_bytes, bucket_bytes);

  // Gradients as views into the bucket buffers, with each parameter's own strides (so
  // channels-last parameters get channels-last gradients and accumulation stays in place).
  bucket_of_.assign(params_.size(), -1);
  at::NoGradGuard no_grad;
  for (std::size_t b = 0; b < buckets_.size(); ++b) {
    std::int64_t numel = 0;
    for (int i : buckets_[b]) numel += params_[i].numel();
    const at::Tensor& first = params_[buckets_[b].front()];
    at::Tensor buffer = at::zeros({numel}, first.options());
    std::int64_t offset = 0;
    for (int i : buckets_[b]) {
      at::Tensor& p = params_[i];
      at::Tensor view = buffer.as_strided(p.sizes(), p.strides(), offset);
      if (p.grad().defined()) view.copy_(p.grad());
      p.mutable_grad() = view;
      bucket_of_[i] = static_cast<int>(b);
      offset += p.numel();
    }
    buffers_.push_back(buffer);
  }

  pending_in_bucket_.assign(buckets_.size(), 0);
  in_flight_.resize(buckets_.size());
  seen_.assign(params_.size(), false);
  for (std::size_t i = 0; i < params_.size(); ++i) {
    auto acc = torch::autograd::impl::grad_accumulator(params_[i]);
    torch::autograd::Node* node = acc.get();
    hook_keys_.push_back(
        node->add_post_hook(std::make_unique<torch::autograd::utils::LambdaPostHook>(
            [this, i](const torch::autograd::variable_list& outputs,
                      const torch::autograd::variable_list& /*inputs*/) {
              OnGradientReady(static_cast<int>(i));
              return outputs;
            })));
    accumulators_.push_back(std::make_shared<decltype(acc)>(std::move(acc)));
    accumulator_nodes_.push_back(node);
  }
}

// The hooks point at this object: a reducer replaced after a re-formed group must leave none.
GradientReducer::~GradientReducer() {
  for (std::size_t i = 0; i < accumulator_nodes_.size(); ++i) {
    accumulator_nodes_[i]->del_post_hook(hook_keys_[i]);
  }
}

void GradientReducer::PrepareForBackward(bool reduce) {
  std::lock_guard lock(mutex_);
  reduce_ = reduce && comm_ != nullptr;
  gradients_pending_ = static_cast<int>(params_.size());
  for (std::size_t b = 0; b < buckets_.size(); ++b) {
    pending_in_bucket_[b] = static_cast<int>(buckets_[b].size());
  }
  std::fill(seen_.begin(), seen_.end(), false);
  launches_.clear();
}

void GradientReducer::OnGradientReady(int param) {
  std::lock_guard lock(mutex_);
  if (!reduce_ || seen_[param]) return;
  seen_[param] = true;
  --gradients_pending_;
  const int bucket = bucket_of_[param];
  if (--pending_in_bucket_[bucket] == 0) Launch(bucket);
}

void GradientReducer::Launch(int bucket) {
  launches_.push_back({bucket, gradients_pending_});
  in_flight_[bucket] = comm_->AllReduceSum(buffers_[bucket]);
}

void GradientReducer::FinishBackward() {
  std::lock_guard lock(mutex_);
  if (!reduce_) return;
  for (std::size_t b = 0; b < buckets_.size(); ++b) {
    if (!in_flight_[b]) Launch(static_cast<int>(b));
  }
  const double scale = 1.0 / comm_->size();
  for (std::size_t b = 0; b < buckets_.size(); ++b) {
    in_flight_[b]->Wait();
    in_flight_[b].reset();
    buffers_[b].mul_(scale);
  }
  reduce_ = false;
}

void GradientReducer::ZeroGrad() {
  at::NoGradGuard no_grad;
  for (at::Tensor& buffer : buffers_) buffer.zero_();
}

}  // namespace mxrun::trainer
