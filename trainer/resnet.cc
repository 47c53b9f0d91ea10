#include "trainer/resnet.h"

#include <stdexcept>

#include <torch/nn/functional/activation.h>
#include <torch/nn/functional/pooling.h>
#include <torch/nn/init.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/pooling.h>

namespace mxrun::trainer {
namespace {

torch::nn::AnyModule Norm(int channels, bool batch_norm) {
  if (batch_norm) return torch::nn::AnyModule(torch::nn::BatchNorm2d(channels));
  return torch::nn::AnyModule(torch::nn::Identity());
}

torch::nn::Conv2d Conv(int in, int out, int kernel, int stride) {
  return torch::nn::Conv2d(
      torch::nn::Conv2dOptions(in, out, kernel).stride(stride).padding(kernel / 2).bias(false));
}

// BasicBlock (two 3x3 convs, expansion 1) or Bottleneck (1x1, 3x3, 1x1, expansion 4), each conv
// followed by its norm; registered as conv1/bn1, conv2/bn2[, conv3/bn3] as torchvision names them.
class BlockImpl : public torch::nn::Module {
 public:
  BlockImpl(int in, int planes, int stride, bool bottleneck, bool batch_norm) {
    const int out = planes * (bottleneck ? 4 : 1);
    if (bottleneck) {
      Add(in, planes, 1, 1, batch_norm);
      Add(planes, planes, 3, stride, batch_norm);  // ResNet v1.5: the stride sits in the 3x3
      Add(planes, out, 1, 1, batch_norm);
    } else {
      Add(in, planes, 3, stride, batch_norm);
      Add(planes, planes, 3, 1, batch_norm);
    }
    if (stride != 1 || in != out) {
      downsample_ = torch::nn::Sequential(Conv(in, out, 1, stride));
      downsample_->push_back(Norm(out, batch_norm));
      register_module("downsample", downsample_);
    }
  }

  torch::Tensor forward(torch::Tensor x) {
    torch::Tensor identity = downsample_ ? downsample_->forward(x) : x;
    torch::Tensor y = x;
    for (std::size_t i = 0; i < convs_.size(); ++i) {
      y = norms_[i].forward(convs_[i]->forward(y));
      if (i + 1 < convs_.size()) y = torch::relu(y);  // the last one is added to identity first
    }
    return torch::relu(y + identity);
  }

 private:
  void Add(int in, int out, int kernel, int stride, bool batch_norm) {
    const std::string n = std::to_string(convs_.size() + 1);
    convs_.push_back(register_module("conv" + n, Conv(in, out, kernel, stride)));
    norms_.push_back(Norm(out, batch_norm));
    register_module("bn" + n, norms_.back().ptr());
  }

  std::vector<torch::nn::Conv2d> convs_;
  std::vector<torch::nn::AnyModule> norms_;
  torch::nn::Sequential downsample_{nullptr};
};
TORCH_MODULE(Block);

struct ArchSpec {
  bool bottleneck;
  int blocks[4];
};

ArchSpec SpecFor(const std::string& arch) {
  if (arch == "resnet18") return {false, {2, 2, 2, 2}};
  if (arch == "resnet34") return {false, {3, 4, 6, 3}};
  if (arch == "resnet50") return {true, {3, 4, 6, 3}};
  if (arch == "resnet101") return {true, {3, 4, 23, 3}};
  if (arch == "resnet152") return {true, {3, 8, 36, 3}};
  throw std::invalid_argument("unknown model '" + arch +
                              "' (accepted: resnet18, resnet34, resnet50, resnet101, resnet152)");
}

}  // namespace

ResNetImpl::ResNetImpl(const ResNetConfig& config) : imagenet_stem_(config.imagenet_stem) {
  const ArchSpec spec = SpecFor(config.arch);
  const int w = config.width;
  conv1_ = register_module("conv1", config.imagenet_stem ? Conv(3, w, 7, 2) : Conv(3, w, 3, 1));
  bn1_ = Norm(w, config.batch_norm);
  register_module("bn1", bn1_.ptr());
  int in = w;
  for (int stage = 0; stage < 4; ++stage) {
    const int planes = w << stage;
    for (int b = 0; b < spec.blocks[stage]; ++b) {
      const int stride = (stage > 0 && b == 0) ? 2 : 1;
      layers_[stage]->push_back(Block(in, planes, stride, spec.bottleneck, config.batch_norm));
      in = planes * (spec.bottleneck ? 4 : 1);
    }
    register_module("layer" + std::to_string(stage + 1), layers_[stage]);
  }
  fc_ = register_module("fc", torch::nn::Linear(in, config.num_classes));

  // torchvision's initialisation: Kaiming-normal (fan_out, ReLU) convolutions, BatchNorm weight 1
  // and bias 0; the classifier keeps nn.Linear's default.
  torch::NoGradGuard no_grad;
  for (auto& module : modules(/*include_self=*/false)) {
    if (auto* conv = module->as<torch::nn::Conv2d>()) {
      torch::nn::init::kaiming_normal_(conv->weight, 0.0, torch::kFanOut, torch::kReLU);
    } else if (auto* bn = module->as<torch::nn::BatchNorm2d>()) {
      torch::nn::init::ones_(bn->weight);
      torch::nn::init::zeros_(bn->bias);
    }
  }
}

torch::Tensor ResNetImpl::forward(torch::Tensor x) {
  x = torch::relu(bn1_.forward(conv1_->forward(x)));
  if (imagenet_stem_) {
    x = torch::max_pool2d(x, /*kernel_size=*/3, /*stride=*/2, /*padding=*/1);
  }
  for (auto& layer : layers_) x = layer->forward(x);
  x = torch::adaptive_avg_pool2d(x, {1, 1}).flatten(1);
  return fc_->forward(x);
}

int64_t CountParameters(torch::nn::Module& module) {
  int64_t count = 0;
  for (const auto& p : module.parameters()) {
    if (p.requires_grad()) count += p.numel();
  }
  return count;
}

}  // namespace mxrun::trainer
