#include "trainer/checkpoint.h"

#include <dirent.h>
#include <unistd.h>

#include <cstring>
#include <stdexcept>

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/Generator.h>
#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>
#include <torch/serialize/input-archive.h>
#include <torch/serialize/output-archive.h>

#include "common/files.h"

namespace mxrun::trainer {
namespace {

constexpr const char* kFormat = "mxrun-train-checkpoint-1";

void WriteInt(torch::serialize::OutputArchive& archive, const std::string& key, std::int64_t v) {
  archive.write(key, torch::tensor(v, torch::kInt64));
}

std::int64_t ReadInt(torch::serialize::InputArchive& archive, const std::string& key) {
  torch::Tensor t;
  archive.read(key, t);
  return t.item<std::int64_t>();
}

TrainingProgress ReadProgress(torch::serialize::InputArchive& archive, const std::string& path) {
  torch::Tensor format;
  if (!archive.try_read("progress/format_version", format) || format.item<std::int64_t>() != 1) {
    throw std::runtime_error(path + " is not a checkpoint of this trainer (" + kFormat + ")");
  }
  TrainingProgress p;
  p.epoch = ReadInt(archive, "progress/epoch");
  p.samples_in_epoch = ReadInt(archive, "progress/samples_in_epoch");
  p.samples_seen = ReadInt(archive, "progress/samples_seen");
  p.step = ReadInt(archive, "progress/step");
  p.world_size = ReadInt(archive, "progress/world_size");
  torch::Tensor scale;
  archive.read("progress/loss_scale", scale);
  p.loss_scale = scale.item<double>();
  return p;
}

torch::serialize::InputArchive OpenArchive(const std::string& path, torch::Device device) {
  torch::serialize::InputArchive archive;
  try {
    archive.load_from(path, device);
  } catch (const c10::Error& e) {
    throw std::runtime_error("cannot read checkpoint " + path + ": " + e.what_without_backtrace());
  }
  return archive;
}

// Temporary files left by writers that were killed mid-write (only rank 0 writes, one at a time).
void RemoveStaleTemporaries(const std::string& dir) {
  DIR* folder = ::opendir(dir.c_str());
  if (folder == nullptr) return;
  while (dirent* entry = ::readdir(folder)) {
    if (std::string(entry->d_name).rfind("checkpoint.pt.tmp.", 0) == 0) {
      ::unlink((dir + "/" + entry->d_name).c_str());
    }
  }
  ::closedir(folder);
}

std::string CheckpointPath(const std::string& dir) { return dir + "/checkpoint.pt"; }

}  // namespace

void SaveCheckpoint(const std::string& dir, torch::nn::Module& model,
                    torch::optim::Optimizer& optimizer, const TrainingProgress& progress) {
  if (!MakeDirs(dir)) throw std::runtime_error("cannot create checkpoint folder " + dir);
  torch::serialize::OutputArchive archive;
  WriteInt(archive, "progress/format_version", 1);
  WriteInt(archive, "progress/epoch", progress.epoch);
  WriteInt(archive, "progress/samples_in_epoch", progress.samples_in_epoch);
  WriteInt(archive, "progress/samples_seen", progress.samples_seen);
  WriteInt(archive, "progress/step", progress.step);
  WriteInt(archive, "progress/world_size", progress.world_size);
  archive.write("progress/loss_scale", torch::tensor(progress.loss_scale, torch::kFloat64));
  for (const auto& item : model.named_parameters()) {
    archive.write("model/" + item.key(), item.value().detach().to(torch::kCPU).contiguous());
  }
  for (const auto& item : model.named_buffers()) {
    archive.write("model/" + item.key(), item.value().to(torch::kCPU).contiguous(),
                  /*is_buffer=*/true);
  }
  torch::serialize::OutputArchive optimizer_archive;
  optimizer.save(optimizer_archive);
  archive.write("optimizer", optimizer_archive);
  {
    auto gen = at::detail::getDefaultCPUGenerator();
    std::lock_guard<std::mutex> lock(gen.mutex());
    archive.write("rng/cpu", gen.get_state());
  }

  const std::string final_path = CheckpointPath(dir);
  const std::string temp_path = final_path + ".tmp." + std::to_string(::getpid());
  RemoveStaleTemporaries(dir);
  try {
    archive.save_to(temp_path);
  } catch (const c10::Error& e) {
    ::unlink(temp_path.c_str());
    throw std::runtime_error("cannot write checkpoint " + temp_path + ": " +
                             e.what_without_backtrace());
  }
  if (const int err = ReplaceFileDurably(temp_path, final_path); err != 0) {
    throw std::runtime_error("cannot make checkpoint " + temp_path + " durable as " + final_path +
                             ": " + std::strerror(err));
  }
}

struct CheckpointFile::Archive {
  torch::serialize::InputArchive archive;
};

CheckpointFile::CheckpointFile(std::string path, std::unique_ptr<Archive> archive,
                               TrainingProgress progress)
    : path_(std::move(path)), archive_(std::move(archive)), progress_(progress) {}

CheckpointFile::~CheckpointFile() = default;

std::unique_ptr<CheckpointFile> CheckpointFile::Open(const std::string& dir,
                                                     const torch::nn::Module& model) {
  const std::string path = CheckpointPath(dir);
  if (::access(path.c_str(), F_OK) != 0) return nullptr;
  // Everything is read onto the model's device, so the optimizer's momentum buffers land beside
  // the parameters they belong to.
  const auto params = model.parameters();
  const torch::Device device = params.empty() ? torch::Device(torch::kCPU) : params[0].device();
  auto archive = std::make_unique<Archive>(Archive{OpenArchive(path, device)});
  const TrainingProgress progress = ReadProgress(archive->archive, path);
  return std::unique_ptr<CheckpointFile>(new CheckpointFile(path, std::move(archive), progress));
}

void CheckpointFile::LoadInto(torch::nn::Module& model, torch::optim::Optimizer& optimizer) {
  torch::serialize::InputArchive& archive = archive_->archive;
  torch::NoGradGuard no_grad;
  auto copy_in = [&](const std::string& name, torch::Tensor target) {
    torch::Tensor stored;
    if (!archive.try_read("model/" + name, stored)) {
      throw std::runtime_error("checkpoint " + path_ + " has no tensor for '" + name +
                               "' (was it written for another --model or --width?)");
    }
    if (stored.sizes() != target.sizes()) {
      throw std::runtime_error("checkpoint " + path_ + ": '" + name + "' has shape " +
                               c10::str(stored.sizes()) + ", the model has " +
                               c10::str(target.sizes()));
    }
    target.copy_(stored);
  };
  for (const auto& item : model.named_parameters()) copy_in(item.key(), item.value());
  for (const auto& item : model.named_buffers()) copy_in(item.key(), item.value());
  torch::serialize::InputArchive optimizer_archive;
  archive.read("optimizer", optimizer_archive);
  optimizer.load(optimizer_archive);
  torch::Tensor rng;
  if (archive.try_read("rng/cpu", rng)) {
    auto gen = at::detail::getDefaultCPUGenerator();
    std::lock_guard<std::mutex> lock(gen.mutex());
    gen.set_state(rng.to(torch::kCPU));
  }
}

std::optional<TrainingProgress> PeekCheckpoint(const std::string& dir) {
  const std::string path = CheckpointPath(dir);
  if (::access(path.c_str(), F_OK) != 0) return std::nullopt;
  torch::serialize::InputArchive archive = OpenArchive(path, torch::kCPU);
  return ReadProgress(archive, path);
}

TrainingProgress LoadCheckpoint(const std::string& dir, torch::nn::Module& model,
                                torch::optim::Optimizer& optimizer) {
  auto file = CheckpointFile::Open(dir, model);
  if (!file) throw std::runtime_error("no checkpoint in " + dir);
  file->LoadInto(model, optimizer);
  return file->progress();
}

}  // namespace mxrun::trainer
