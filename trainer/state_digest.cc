#include "trainer/state_digest.h"

#include <torch/nn/module.h>
#include <torch/optim/sgd.h>

#include "trainer/sha256.h"

namespace mxrun::trainer {
namespace {

void HashTensor(Sha256& hash, const std::string& name, const at::Tensor& tensor) {
  const at::Tensor cpu = tensor.detach().to(at::kCPU).contiguous();
  hash.Update(name);
  hash.Update("\0", 1);
  hash.Update(std::string(c10::toString(cpu.scalar_type())));
  for (int64_t size : cpu.sizes()) hash.Update(&size, sizeof size);
  hash.Update(cpu.data_ptr(), cpu.nbytes());
}

}  // namespace

std::string StateDigest(torch::nn::Module& model, torch::optim::SGD& optimizer, bool with_buffers) {
  Sha256 hash;
  for (const auto& item : model.named_parameters()) HashTensor(hash, item.key(), item.value());
  if (with_buffers) {
    for (const auto& item : model.named_buffers()) HashTensor(hash, item.key(), item.value());
  }
  const auto& state = optimizer.state();
  for (const torch::optim::OptimizerParamGroup& group : optimizer.param_groups()) {
    for (const at::Tensor& param : group.params()) {
      auto it = state.find(param.unsafeGetTensorImpl());
      if (it == state.end()) {
        hash.Update("none");
        continue;
      }
      const auto& sgd = static_cast<const torch::optim::SGDParamState&>(*it->second);
      if (!sgd.momentum_buffer().defined()) {
        hash.Update("none");
        continue;
      }
      HashTensor(hash, "momentum", sgd.momentum_buffer());
    }
  }
  return hash.HexDigest();
}

}  // namespace mxrun::trainer
