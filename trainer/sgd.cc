#include "trainer/sgd.h"

#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include <ATen/ATen.h>
#include <torch/optim/sgd.h>
#include <torch/version.h>

namespace mxrun::trainer {
namespace {

// The optimizer's per-parameter state is keyed by the parameter's TensorImpl: in LibTorch 1.x as a
// string (what c10::guts::to_string printed, the pointer through an ostream; that helper is gone
// in 2.x), in 2.x as the pointer itself.
template <typename Map>
typename Map::key_type StateKey(const at::Tensor& p) {
  if constexpr (std::is_same_v<typename Map::key_type, std::string>) {
    std::ostringstream key;
    key << p.unsafeGetTensorImpl();
    return key.str();
  } else {
    return p.unsafeGetTensorImpl();
  }
}

template <typename Map>
torch::optim::SGDParamState* FindState(Map& states, const at::Tensor& param) {
  auto it = states.find(StateKey<Map>(param));
  return it == states.end() ? nullptr : &static_cast<torch::optim::SGDParamState&>(*it->second);
}

}  // namespace

void ForeachSgdStep(torch::optim::SGD& optimizer) {
  at::NoGradGuard no_grad;
  auto& states = optimizer.state();
  using Map = std::decay_t<decltype(states)>;
  for (auto& group : optimizer.param_groups()) {
    const auto& o = static_cast<const torch::optim::SGDOptions&>(group.options());
    std::vector<at::Tensor> params, grads;
    for (const at::Tensor& p : group.params()) {
      if (!p.grad().defined()) continue;
      params.push_back(p);
      grads.push_back(p.grad());
    }
    if (params.empty()) continue;
    // d_p = grad + weight_decay * p (a new list: the gradients stay as they are)
    std::vector<at::Tensor> steps =
        o.weight_decay() != 0 ? at::_foreach_add(grads, params, o.weight_decay()) : grads;
    if (o.momentum() != 0) {
      // buf = momentum * buf + (1 - dampening) * d_p; a parameter's first step starts its
      // buffer as a copy of d_p, as torch::optim::SGD does.
      std::vector<at::Tensor> buffers, kept, kept_steps;
      for (std::size_t i = 0; i < params.size(); ++i) {
        if (auto* state = FindState(states, params[i])) {
          buffers.push_back(state->momentum_buffer());
          kept.push_back(buffers.back());
          kept_steps.push_back(steps[i]);
        } else {
          auto fresh = std::make_unique<torch::optim::SGDParamState>();
          fresh->momentum_buffer(steps[i].clone().detach());
          buffers.push_back(fresh->momentum_buffer());
          states.emplace(StateKey<Map>(params[i]), std::move(fresh));
        }
      }
      if (!kept.empty()) {
        at::_foreach_mul_(kept, o.momentum());
        at::_foreach_add_(kept, kept_steps, 1 - o.dampening());
      }
      // Nesterov: d_p + momentum * buf; otherwise buf itself.
      steps = o.nesterov() ? at::_foreach_add(steps, buffers, o.momentum()) : buffers;
    }
    at::_foreach_add_(params, steps, -o.lr());
  }
}

void ClipGradNorm(const std::vector<at::Tensor>& params, double max_norm) {
  at::NoGradGuard no_grad;
  std::vector<at::Tensor> grads;
  for (const at::Tensor& p : params) {
    if (p.grad().defined()) grads.push_back(p.grad());
  }
  if (grads.empty()) return;
  const at::Tensor total = at::stack(at::_foreach_norm(grads, 2)).norm(2);
  const at::Tensor scale = (max_norm / (total + 1e-6)).clamp_max(1.0);
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 1)
  at::_foreach_mul_(grads, scale);
#else
  for (at::Tensor& g : grads) g.mul_(scale);  // no tensor-scale _foreach_mul_ before 2.1
#endif
}

at::Tensor MomentumBuffer(torch::optim::SGD& optimizer, const at::Tensor& param) {
  auto& states = optimizer.state();
  using Map = std::decay_t<decltype(states)>;
  if (auto* state = FindState(states, param)) return state->momentum_buffer();
  auto fresh = std::make_unique<torch::optim::SGDParamState>();
  fresh->momentum_buffer(at::zeros_like(param));
  at::Tensor buffer = fresh->momentum_buffer();
  states.emplace(StateKey<Map>(param), std::move(fresh));
  return buffer;
}

}  // namespace mxrun::trainer
