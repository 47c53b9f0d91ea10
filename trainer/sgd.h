#pragma once
// The optimizer step, as multi-tensor (_foreach_) kernels the way torch.optim.SGD and
// clip_grad_norm_ run by default on CUDA: a few kernel launches per parameter group instead of
// about five per parameter (ResNet-50: ~800 launches a step down to ~5), which matters once the
// GPU is faster than the host can launch. SGD works on torch::optim::SGD's own parameter groups
// and state, so checkpoints and restores see exactly what torch::optim::SGD::step would leave.

#include <vector>

namespace torch::optim {
class SGD;
}
namespace at {
class Tensor;
}

namespace mxrun::trainer {

// One step of `optimizer` over the parameters that have gradients, with each group's lr,
// momentum, dampening, weight decay and Nesterov setting; the same update as
// torch::optim::SGD::step (and torch.optim.SGD). Gradients are read, never written.
void ForeachSgdStep(torch::optim::SGD& optimizer);

// Scales the gradients of `params` so that their global L2 norm is at most `max_norm`, as
// torch.nn.utils.clip_grad_norm_ does (multi-tensor norms, one scale factor clamped to 1). Unlike
// LibTorch 1.x's torch::nn::utils::clip_grad_norm_, which returns the norm as a double, it never
// waits for the device.
void ClipGradNorm(const std::vector<at::Tensor>& params, double max_norm);

// The SGD momentum buffer of `param` inside `optimizer` (created as zeros when the optimizer has
// no state for it yet), so that a restore can broadcast momentum between ranks. The returned
// tensor is the optimizer's own: writing into it changes the next step.
at::Tensor MomentumBuffer(torch::optim::SGD& optimizer, const at::Tensor& param);

}  // namespace mxrun::trainer
