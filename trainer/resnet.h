#pragma once
// ResNet-18/34/50/101/152 (He et al. 2015) in LibTorch, laid out like torchvision's so parameter
// names and counts match (conv1, bn1, layer1..layer4, fc; Bottleneck strides in the 3x3 conv,
// "ResNet v1.5"). Two stems: CIFAR (3x3 conv, stride 1, no max-pool: the usual choice for 32x32
// images) and ImageNet (7x7 conv, stride 2, then 3x3 max-pool).

#include <string>

#include <torch/nn/module.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/pimpl.h>

namespace mxrun::trainer {

struct ResNetConfig {
  std::string arch = "resnet18";  // resnet18|34|50|101|152
  bool imagenet_stem = false;
  int num_classes = 10;
  int width = 64;          // channels of layer1 (doubling per stage)
  bool batch_norm = true;  // false: identity instead of BatchNorm (tests of exact gradients)
};

class ResNetImpl : public torch::nn::Module {
 public:
  explicit ResNetImpl(const ResNetConfig& config);
  torch::Tensor forward(torch::Tensor x);

 private:
  bool imagenet_stem_;
  torch::nn::Conv2d conv1_{nullptr};
  torch::nn::AnyModule bn1_;
  torch::nn::Sequential layers_[4];
  torch::nn::Linear fc_{nullptr};
};
TORCH_MODULE(ResNet);

// Number of trainable parameters (the figure torchvision's models report).
int64_t CountParameters(torch::nn::Module& module);

}  // namespace mxrun::trainer
