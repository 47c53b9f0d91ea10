// The trainer's LibTorch parts: the ResNet family, the DDP-style gradient reducer over real Gloo
// groups (threads of this process, 127.0.0.1), the optimizer step and checkpoints. Built by the
// whole project against Debian's LibTorch and, on a GPU machine, against PyTorch's (tests/
// trainer_tests.cmake); the [gpu] cases need a CUDA device.
// LibTorch first: its glog CHECK macros must not meet Catch's.
#include <torch/cuda.h>
#include <torch/nn/functional/loss.h>
#include <torch/nn/utils/clip_grad.h>
#include <torch/optim/sgd.h>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <catch2/catch.hpp>

#include <fstream>
#include <set>
#include <thread>

#include "tests/temp_dir.h"
#include "trainer/checkpoint.h"
#include "trainer/collectives.h"
#include "trainer/gradient_reducer.h"
#include "trainer/resnet.h"
#include "trainer/sgd.h"

using namespace mxrun::trainer;
using mxrun::testing::TempDir;

namespace {

ResNet MakeModel(const std::string& arch, bool imagenet, int classes, int width, bool bn,
                 uint64_t seed) {
  torch::manual_seed(seed);
  ResNetConfig c;
  c.arch = arch;
  c.imagenet_stem = imagenet;
  c.num_classes = classes;
  c.width = width;
  c.batch_norm = bn;
  return ResNet(c);
}

torch::Tensor Loss(ResNet& model, const torch::Tensor& x, const torch::Tensor& y) {
  return torch::nn::functional::cross_entropy(model->forward(x), y);
}

// Gradients after one step of `world` ranks (threads with real Gloo groups), each on its
// contiguous slice of (x, y) split into `micro` micro-batches, through GradientReducer. Rank 0's
// bucket launches over all micro-batches of the step go to `launches`, its bucket count to
// `buckets`.
std::vector<std::vector<torch::Tensor>> DataParallelGradients(
    const torch::Tensor& x, const torch::Tensor& y, int world, int micro, std::int64_t first_bucket,
    std::int64_t bucket, std::vector<GradientReducer::LaunchRecord>* launches = nullptr,
    size_t* buckets = nullptr) {
  auto groups = MakeLocalGlooGroups(world, std::chrono::seconds(30));
  std::vector<ResNet> models;
  for (int r = 0; r < world; ++r) models.push_back(MakeModel("resnet18", false, 10, 8, false, 42));
  std::vector<std::vector<torch::Tensor>> grads(world);
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      GradientReducer reducer(models[r]->parameters(), groups[r].get(), first_bucket, bucket);
      auto xs = x.chunk(world)[r].chunk(micro);
      auto ys = y.chunk(world)[r].chunk(micro);
      for (int m = 0; m < micro; ++m) {
        reducer.PrepareForBackward(m == micro - 1);
        (Loss(models[r], xs[m], ys[m]) / micro).backward();
        if (r == 0 && launches) {
          launches->insert(launches->end(), reducer.last_launches().begin(),
                           reducer.last_launches().end());
        }
      }
      reducer.FinishBackward();
      for (auto& p : models[r]->parameters()) grads[r].push_back(p.grad().clone());
      if (r == 0 && buckets) *buckets = reducer.buckets().size();
    });
  }
  for (auto& t : threads) t.join();
  return grads;
}

std::vector<torch::Tensor> SingleProcessGradients(const torch::Tensor& x, const torch::Tensor& y) {
  ResNet model = MakeModel("resnet18", false, 10, 8, false, 42);
  Loss(model, x, y).backward();
  std::vector<torch::Tensor> grads;
  for (auto& p : model->parameters()) grads.push_back(p.grad().clone());
  return grads;
}

double MaxRelativeError(const std::vector<torch::Tensor>& a, const std::vector<torch::Tensor>& b) {
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double scale = std::max(1e-3, b[i].abs().max().item<double>());
    worst = std::max(worst, (a[i] - b[i]).abs().max().item<double>() / scale);
  }
  return worst;
}

}  // namespace

TEST_CASE("ImageNet-stem ResNets have torchvision's parameter counts", "[resnet]") {
  torch::set_num_threads(1);
  CHECK(CountParameters(*MakeModel("resnet18", true, 1000, 64, true, 0)) == 11'689'512);
  CHECK(CountParameters(*MakeModel("resnet34", true, 1000, 64, true, 0)) == 21'797'672);
  CHECK(CountParameters(*MakeModel("resnet50", true, 1000, 64, true, 0)) == 25'557'032);
  CHECK(CountParameters(*MakeModel("resnet101", true, 1000, 64, true, 0)) == 44'549'160);
}

TEST_CASE("parameter names follow torchvision's layout", "[resnet]") {
  auto model = MakeModel("resnet50", true, 1000, 64, true, 0);
  auto named = model->named_parameters();
  CHECK(named.contains("conv1.weight"));
  CHECK(named.contains("layer1.0.conv3.weight"));
  CHECK(named.contains("layer1.0.downsample.0.weight"));
  CHECK(named.contains("layer4.2.bn3.bias"));
  CHECK(named.contains("fc.weight"));
  CHECK(named["layer2.0.conv2.weight"].sizes() == torch::IntArrayRef({128, 128, 3, 3}));
}

TEST_CASE("both stems give class scores for a batch", "[resnet]") {
  torch::NoGradGuard no_grad;
  auto cifar = MakeModel("resnet18", false, 10, 16, true, 0);
  cifar->eval();
  CHECK(cifar->forward(torch::randn({3, 3, 32, 32})).sizes() == torch::IntArrayRef({3, 10}));
  auto imagenet = MakeModel("resnet50", true, 1000, 8, true, 0);
  imagenet->eval();
  CHECK(imagenet->forward(torch::randn({2, 3, 64, 64})).sizes() == torch::IntArrayRef({2, 1000}));
}

TEST_CASE("convolutions get Kaiming-normal (fan_out) initialisation", "[resnet]") {
  auto model = MakeModel("resnet18", false, 10, 64, true, 0);
  auto w = model->named_parameters()["layer3.0.conv1.weight"];  // 256 x 128 x 3 x 3
  const double expected_std = std::sqrt(2.0 / (256 * 9));
  CHECK(w.std().item<double>() == Approx(expected_std).epsilon(0.02));
  CHECK(model->named_parameters()["bn1.weight"].eq(1).all().item<bool>());
}

TEST_CASE("two Gloo ranks produce the gradients of one process on the whole batch",
          "[reducer][gloo]") {
  torch::manual_seed(7);
  auto x = torch::randn({8, 3, 32, 32});
  auto y = torch::randint(0, 10, {8});
  auto reference = SingleProcessGradients(x, y);
  auto grads = DataParallelGradients(x, y, 2, 1, 64 * 1024, 256 * 1024);
  CHECK(MaxRelativeError(grads[0], reference) < 1e-5);
  CHECK(MaxRelativeError(grads[1], reference) < 1e-5);
}

TEST_CASE("a rank refuses a store that holds another run's id", "[gloo][isolation]") {
  // Another job's rank 0 hosts a store on the port this worker was given.
  c10d::TCPStoreOptions options;
  options.port = 0;
  options.isServer = true;
  options.waitWorkers = false;
  auto foreign = c10::make_intrusive<c10d::TCPStore>("127.0.0.1", options);
  const std::string other = "slurm-4711";
  foreign->set("mxrun_run_id", std::vector<uint8_t>(other.begin(), other.end()));
  mxrun::WorkerIdentity id;
  id.rank = 1;
  id.world_size = 2;
  id.master_addr = "127.0.0.1";
  id.master_port = foreign->getPort();
  id.run_id = "slurm-4712";
  try {
    JoinProcessGroup(id, CommBackend::kGloo, at::Device(at::kCPU), std::chrono::seconds(10));
    FAIL("joined another run's store");
  } catch (const CollectiveFailed& e) {
    CHECK_THAT(e.what(), Catch::Contains("belongs to run 'slurm-4711', not this worker's run "
                                         "'slurm-4712'"));
  }
}

TEST_CASE("gradient accumulation reduces once and equals the whole batch", "[reducer][gloo]") {
  torch::manual_seed(8);
  auto x = torch::randn({8, 3, 32, 32});
  auto y = torch::randint(0, 10, {8});
  auto reference = SingleProcessGradients(x, y);
  std::vector<GradientReducer::LaunchRecord> launches;
  size_t buckets = 0;
  auto grads = DataParallelGradients(x, y, 2, 2, 64 * 1024, 256 * 1024, &launches, &buckets);
  CHECK(MaxRelativeError(grads[0], reference) < 1e-5);
  CHECK(MaxRelativeError(grads[1], reference) < 1e-5);
  // Every bucket was all-reduced exactly once in the step: none during the first micro-batch.
  std::set<int> launched;
  for (const auto& l : launches) launched.insert(l.bucket);
  CHECK(launches.size() == buckets);
  CHECK(launched.size() == buckets);
}

TEST_CASE("bucket all-reduces start while backward is still running", "[reducer][gloo]") {
  torch::manual_seed(9);
  auto x = torch::randn({4, 3, 32, 32});
  auto y = torch::randint(0, 10, {4});
  std::vector<GradientReducer::LaunchRecord> launches;
  DataParallelGradients(x, y, 2, 1, 16 * 1024, 64 * 1024, &launches);
  REQUIRE(launches.size() > 3);
  // The first bucket (the classifier and last stage) was handed to Gloo while most gradients
  // were still to be computed; every bucket was launched from a gradient hook, not at the end.
  CHECK(launches.front().gradients_pending > 0);
  int launched_during_backward = 0;
  for (const auto& l : launches) launched_during_backward += l.gradients_pending > 0;
  CHECK(launched_during_backward == static_cast<int>(launches.size()) - 1);
  CHECK(launches.back().gradients_pending == 0);
}

TEST_CASE("a checkpoint restores weights, momentum and progress", "[checkpoint]") {
  TempDir dir;
  auto x = torch::randn({4, 3, 32, 32});
  auto y = torch::randint(0, 10, {4});
  auto a = MakeModel("resnet18", false, 10, 8, true, 1);
  torch::optim::SGD opt_a(a->parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
  Loss(a, x, y).backward();
  opt_a.step();
  TrainingProgress progress;
  progress.epoch = 3;
  progress.samples_in_epoch = 640;
  progress.samples_seen = 12345;
  progress.step = 99;
  progress.world_size = 4;
  // A half-written temporary file from a killed writer disturbs neither saving nor loading, and
  // the next save clears it away.
  std::ofstream(dir.path() + "/checkpoint.pt.tmp.12345") << "partial";
  SaveCheckpoint(dir.path(), *a, opt_a, progress);
  CHECK(::access((dir.path() + "/checkpoint.pt.tmp.12345").c_str(), F_OK) != 0);

  auto b = MakeModel("resnet18", false, 10, 8, true, 2);
  torch::optim::SGD opt_b(b->parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
  auto peeked = PeekCheckpoint(dir.path());
  REQUIRE(peeked);
  CHECK(peeked->samples_seen == 12345);
  TrainingProgress loaded = LoadCheckpoint(dir.path(), *b, opt_b);
  CHECK(loaded.epoch == 3);
  CHECK(loaded.samples_in_epoch == 640);
  CHECK(loaded.step == 99);
  CHECK(loaded.world_size == 4);
  auto pa = a->parameters(), pb = b->parameters();
  for (size_t i = 0; i < pa.size(); ++i) REQUIRE(torch::equal(pa[i], pb[i]));
  auto ba = a->buffers(), bb = b->buffers();
  for (size_t i = 0; i < ba.size(); ++i) REQUIRE(torch::equal(ba[i], bb[i]));
  // Same momentum: one more identical step keeps the two models identical.
  opt_a.zero_grad();
  opt_b.zero_grad();
  Loss(a, x, y).backward();
  Loss(b, x, y).backward();
  opt_a.step();
  opt_b.step();
  pa = a->parameters();
  pb = b->parameters();
  for (size_t i = 0; i < pa.size(); ++i) REQUIRE(torch::allclose(pa[i], pb[i]));
}

TEST_CASE("momentum buffers are found where the optimizer keeps them", "[checkpoint]") {
  auto model = MakeModel("resnet18", false, 10, 8, true, 1);
  torch::optim::SGD opt(model->parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
  Loss(model, torch::randn({2, 3, 32, 32}), torch::randint(0, 10, {2})).backward();
  opt.step();
  const size_t entries = opt.state().size();
  REQUIRE(entries == model->parameters().size());
  auto p = model->parameters()[0];
  torch::Tensor buffer = MomentumBuffer(opt, p);
  CHECK(opt.state().size() == entries);  // the existing entry, not a new one under another key
  // Writing into it changes what the next step does: it is the optimizer's own tensor.
  {
    torch::NoGradGuard no_grad;
    buffer.fill_(1.0);
  }
  CHECK(MomentumBuffer(opt, p).eq(1.0).all().item<bool>());
  // A fresh optimizer gets zero buffers for parameters it has no state for.
  torch::optim::SGD fresh(model->parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
  CHECK(MomentumBuffer(fresh, p).eq(0.0).all().item<bool>());
  CHECK(fresh.state().size() == 1);
}

struct SgdCase {
  const char* name;
  double momentum, dampening, weight_decay;
  bool nesterov;
};
const SgdCase kSgdCases[] = {{"momentum and weight decay", 0.9, 0, 1e-4, false},
                             {"Nesterov", 0.9, 0, 5e-4, true},
                             {"no momentum", 0, 0, 1e-4, false},
                             {"dampening, no weight decay", 0.8, 0.1, 0, false}};

// Four steps of ForeachSgdStep against torch::optim::SGD::step on copies of the same tensors and
// gradients, on `device`. Two groups (the second without weight decay, as --no_decay_bn_bias makes
// them); tensor 1 has a momentum buffer before the first step (as after a restore), tensor 3 gets
// its first gradient at step 2 (so one step mixes new and existing buffers), tensor 4 never gets
// one and must be left alone. On CUDA the 4-D tensor is channels-last, as the trainer's are.
void CheckSgdMatches(const SgdCase& c, torch::Device device, double rtol, double atol) {
  torch::manual_seed(7);
  const auto format =
      device.is_cuda() ? torch::MemoryFormat::ChannelsLast : torch::MemoryFormat::Contiguous;
  std::vector<torch::Tensor> reference{torch::randn({4, 3, 3, 3}).contiguous(format),
                                       torch::randn({5, 2}), torch::randn({7}), torch::randn({3}),
                                       torch::randn({2, 2})};
  std::vector<torch::Tensor> ours;
  for (auto& t : reference) {
    t = t.to(device).set_requires_grad(true);
    ours.push_back(t.detach().clone().set_requires_grad(true));
  }
  auto make = [&](std::vector<torch::Tensor>& p) {
    auto options = torch::optim::SGDOptions(0.1)
                       .momentum(c.momentum)
                       .dampening(c.dampening)
                       .weight_decay(c.weight_decay)
                       .nesterov(c.nesterov);
    auto no_decay = std::make_unique<torch::optim::SGDOptions>(options);
    no_decay->weight_decay(0);
    std::vector<torch::optim::OptimizerParamGroup> groups;
    groups.emplace_back(std::vector<torch::Tensor>{p[0], p[1]},
                        std::make_unique<torch::optim::SGDOptions>(options));
    groups.emplace_back(std::vector<torch::Tensor>{p[2], p[3], p[4]}, std::move(no_decay));
    return torch::optim::SGD(std::move(groups), options);
  };
  torch::optim::SGD reference_opt = make(reference), our_opt = make(ours);
  if (c.momentum != 0) {
    MomentumBuffer(reference_opt, reference[1]);
    MomentumBuffer(our_opt, ours[1]);
  }
  const torch::Tensor untouched = ours[4].detach().clone();
  for (int step = 0; step < 4; ++step) {
    for (auto* opt : {&reference_opt, &our_opt}) {
      for (auto& group : opt->param_groups()) {
        static_cast<torch::optim::SGDOptions&>(group.options()).lr(0.1 / (step + 1));
      }
    }
    for (size_t i = 0; i < 4; ++i) {
      if (i == 3 && step < 2) continue;
      const torch::Tensor g = torch::randn_like(reference[i]);
      reference[i].mutable_grad() = g.clone();
      ours[i].mutable_grad() = g.clone();
    }
    std::vector<torch::Tensor> grads_before;
    for (auto& t : ours) grads_before.push_back(t.grad().defined() ? t.grad().clone() : t.grad());
    reference_opt.step();
    ForeachSgdStep(our_opt);
    for (size_t i = 0; i < 4; ++i) {
      INFO(c.name << ", step " << step << ", tensor " << i);
      REQUIRE(torch::allclose(ours[i], reference[i], rtol, atol));
      if (!grads_before[i].defined()) continue;
      REQUIRE(torch::equal(ours[i].grad(), grads_before[i]));  // gradients are only read
      if (c.momentum != 0) {
        REQUIRE(torch::allclose(MomentumBuffer(our_opt, ours[i]),
                                MomentumBuffer(reference_opt, reference[i]), rtol, atol));
      }
    }
    CHECK(torch::equal(ours[4], untouched));
    CHECK(our_opt.state().size() == reference_opt.state().size());
  }
}

// ClipGradNorm against torch::nn::utils::clip_grad_norm_, with `max_norm` below the gradients'
// norm (every gradient scaled down) or above it (left as they are); a tensor without a gradient is
// skipped.
void CheckClipMatches(double max_norm, torch::Device device, double rtol, double atol) {
  torch::manual_seed(3);
  std::vector<torch::Tensor> reference, ours;
  for (auto shape : {std::vector<int64_t>{8, 3, 3, 3}, {5}, {4, 4}, {2}}) {
    reference.push_back(torch::randn(shape).to(device).set_requires_grad(true));
    ours.push_back(reference.back().detach().clone().set_requires_grad(true));
  }
  for (size_t i = 0; i + 1 < reference.size(); ++i) {
    const torch::Tensor g = 3 * torch::randn_like(reference[i]);
    reference[i].mutable_grad() = g.clone();
    ours[i].mutable_grad() = g.clone();
  }
  const double norm = torch::nn::utils::clip_grad_norm_(reference, max_norm);
  ClipGradNorm(ours, max_norm);
  INFO("max_norm " << max_norm << ", gradient norm before " << norm);
  REQUIRE(norm > 0.5);  // so that max_norm 0.5 does clip
  for (size_t i = 0; i + 1 < ours.size(); ++i) {
    CHECK(torch::allclose(ours[i].grad(), reference[i].grad(), rtol, atol));
  }
  CHECK_FALSE(ours.back().grad().defined());
}

TEST_CASE("the multi-tensor SGD step makes torch::optim::SGD's update", "[optimizer]") {
  for (const SgdCase& c : kSgdCases) {
    SECTION(c.name) { CheckSgdMatches(c, torch::kCPU, 1e-6, 1e-7); }
  }
}

TEST_CASE("gradient clipping scales like torch::nn::utils::clip_grad_norm_", "[optimizer]") {
  for (double max_norm : {0.5, 1e6}) CheckClipMatches(max_norm, torch::kCPU, 1e-6, 1e-7);
}

// On CUDA the _foreach_ kernels are the fused multi-tensor ones (on the CPU, loops of the
// per-tensor kernels); fused multiply-adds may round differently, hence the looser tolerance.
TEST_CASE("on CUDA tensors the SGD step and clipping match LibTorch's", "[gpu]") {
  REQUIRE(torch::cuda::is_available());
  const torch::Device cuda(torch::kCUDA, 0);
  for (const SgdCase& c : kSgdCases) {
    SECTION(c.name) { CheckSgdMatches(c, cuda, 1e-5, 1e-6); }
  }
  SECTION("clipping") {
    for (double max_norm : {0.5, 1e6}) CheckClipMatches(max_norm, cuda, 1e-5, 1e-6);
  }
}

TEST_CASE("a damaged checkpoint is an error naming the file, a missing one is none",
          "[checkpoint]") {
  TempDir dir;
  CHECK_FALSE(PeekCheckpoint(dir.path()).has_value());
  std::ofstream(dir.path() + "/checkpoint.pt") << "not a zip archive";
  try {
    PeekCheckpoint(dir.path());
    FAIL("no error");
  } catch (const std::runtime_error& e) {
    CHECK_THAT(e.what(), Catch::Contains(dir.path() + "/checkpoint.pt"));
  }
}
