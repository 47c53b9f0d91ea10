#include "trainer/tensorboard_writer.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <utility>

#include "trainer/tensorboard_event.pb.h"
#include "trainer/tfrecord.h"

namespace mxrun::trainer {
namespace {

// (record field, tag) per record kind.
const std::vector<std::pair<const char*, const char*>>& TagsOf(const std::string& event) {
  static const std::vector<std::pair<const char*, const char*>> kStep = {
      {"loss", "loss/train"},
      {"accuracy", "accuracy/train"},
      {"lr", "lr"},
      {"images_per_sec", "images_per_sec"}};
  static const std::vector<std::pair<const char*, const char*>> kEpoch = {
      {"train_loss", "loss/train_epoch"},
      {"train_accuracy", "accuracy/train_epoch"},
      {"images_per_sec", "images_per_sec_epoch"},
      {"test_loss", "loss/test"},
      {"test_accuracy", "accuracy/test"}};
  static const std::vector<std::pair<const char*, const char*>> kRecovery = {
      {"seconds_lost", "recovery/seconds_lost"}, {"steps_redone", "recovery/steps_redone"}};
  static const std::vector<std::pair<const char*, const char*>> kNone;
  if (event == "step") return kStep;
  if (event == "epoch") return kEpoch;
  if (event == "recovery") return kRecovery;
  return kNone;
}

std::string HostName() {
  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) != 0 || host[0] == '\0') return "localhost";
  return host;
}

}  // namespace

std::vector<Scalar> ScalarsOfRecord(const nlohmann::json& record) {
  std::vector<Scalar> scalars;
  const auto event = record.find("event");
  if (event == record.end() || !event->is_string()) return scalars;
  for (const auto& [field, tag] : TagsOf(event->get<std::string>())) {
    const auto value = record.find(field);
    if (value != record.end() && value->is_number()) {
      scalars.push_back({tag, value->get<float>()});
    }
  }
  return scalars;
}

TensorBoardWriter::TensorBoardWriter(const std::string& dir, double wall_time)
    : file_(nullptr, &std::fclose) {
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error) {
    throw std::runtime_error("cannot create --tensorboard_dir " + dir + ": " + error.message());
  }
  path_ = (std::filesystem::path(dir) /
           ("events.out.tfevents." + std::to_string(static_cast<std::int64_t>(wall_time)) + "." +
            HostName() + "." + std::to_string(getpid()) + ".0"))
              .string();
  file_.reset(std::fopen(path_.c_str(), "ab"));
  if (!file_) {
    throw std::runtime_error("cannot create the TensorBoard event file " + path_ + ": " +
                             std::strerror(errno));
  }
  tensorboard::Event version;
  version.set_wall_time(wall_time);
  version.set_file_version("brain.Event:2");
  Append(version.SerializeAsString());
}

void TensorBoardWriter::Write(std::int64_t step, double wall_time,
                              const std::vector<Scalar>& scalars) {
  if (scalars.empty()) return;
  tensorboard::Event event;
  event.set_wall_time(wall_time);
  event.set_step(step);
  for (const Scalar& s : scalars) {
    auto* value = event.mutable_summary()->add_value();
    value->set_tag(s.tag);
    value->set_simple_value(s.value);
  }
  Append(event.SerializeAsString());
}

void TensorBoardWriter::StartSession(std::int64_t first_step, double wall_time) {
  if (session_started_) return;
  session_started_ = true;
  tensorboard::Event event;
  event.set_wall_time(wall_time);
  event.set_step(first_step);
  event.mutable_session_log()->set_status(tensorboard::SessionLog::START);
  Append(event.SerializeAsString());
}

void TensorBoardWriter::Append(const std::string& serialized_event) {
  const std::string record = FrameRecord(serialized_event);
  if (std::fwrite(record.data(), 1, record.size(), file_.get()) != record.size() ||
      std::fflush(file_.get()) != 0) {
    throw std::runtime_error("cannot write the TensorBoard event file " + path_ + ": " +
                             std::strerror(errno));
  }
}

}  // namespace mxrun::trainer
