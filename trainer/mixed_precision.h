#pragma once
// Mixed precision (--amp): autocast around forward passes, and for fp16 the loss scaling that
// keeps small gradients from underflowing, as torch.cuda.amp.GradScaler does it. A mechanism of
// its own, apart from the epoch loop, so the loop reads as steps and what AMP does to a step is
// in one place. Light to include: the tensor type only, no LibTorch API headers.

#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/core/ScalarType.h>

namespace mxrun::trainer {

// Mixed precision for the forward pass, on CUDA only: while the scope lives (and `enabled`),
// CUDA ops that autocast covers run in `dtype`; its end turns autocast off and clears autocast's
// cache of cast weights. Autocast is per thread: open the scope on the thread that runs the pass.
class AutocastScope {
 public:
  AutocastScope(bool enabled, at::ScalarType dtype);
  ~AutocastScope();
  AutocastScope(const AutocastScope&) = delete;
  AutocastScope& operator=(const AutocastScope&) = delete;

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
  // Waits for the device (it reads whether any gradient overflowed).
  bool Unscale(const std::vector<at::Tensor>& params);
};

}  // namespace mxrun::trainer
