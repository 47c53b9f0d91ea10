// Mixed precision (--amp): autocast scopes and fp16 loss scaling (see mixed_precision.h). Kept
// out of the epoch loop's file so that the one place where LibTorch's autocast API and its
// version differences show is here.
#include "trainer/mixed_precision.h"

#include <ATen/autocast_mode.h>
#include <torch/types.h>
#include <torch/version.h>

namespace mxrun::trainer {
namespace {

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

}  // namespace

AutocastScope::AutocastScope(bool enabled, at::ScalarType dtype) : enabled_(enabled) {
  if (enabled_) SetCudaAutocast(true, dtype);
}

AutocastScope::~AutocastScope() {
  if (!enabled_) return;
  SetCudaAutocast(false, at::kFloat);
  at::autocast::clear_cache();
}

bool LossScaler::Unscale(const std::vector<torch::Tensor>& params) {
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

}  // namespace mxrun::trainer
