// The trainer's metrics outputs without LibTorch: JSON lines stamped with the wall clock, and
// TensorBoard event files (CRC-32C, TFRecord framing, Event protobufs), decoded back here.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "tests/temp_dir.h"
#include "trainer/crc32c.h"
#include "trainer/metrics_log.h"
#include "trainer/tensorboard_event.pb.h"
#include "trainer/tensorboard_writer.h"
#include "trainer/tfrecord.h"

using namespace mxrun::trainer;
namespace {

using mxrun::testing::TempDir;
using nlohmann::json;

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

std::vector<std::string> FilesIn(const std::string& dir) {
  std::vector<std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    files.push_back(entry.path().string());
  }
  return files;
}

std::vector<mxrun::tensorboard::Event> ReadEvents(const std::string& path) {
  std::vector<mxrun::tensorboard::Event> events;
  for (const std::string& record : ParseRecords(ReadAll(path))) {
    mxrun::tensorboard::Event event;
    REQUIRE(event.ParseFromString(record));
    events.push_back(event);
  }
  return events;
}

}  // namespace

TEST_CASE("CRC-32C matches the published check values", "[tensorboard]") {
  // The standard check value, and RFC 3720 appendix B.4's 32-byte vectors.
  CHECK(Crc32c("123456789") == 0xE3069283u);
  CHECK(Crc32c(std::string(32, '\0')) == 0x8A9136AAu);
  CHECK(Crc32c(std::string(32, '\xFF')) == 0x62A8AB43u);
  std::string ascending;
  for (int i = 0; i < 32; ++i) ascending.push_back(static_cast<char>(i));
  CHECK(Crc32c(ascending) == 0x46DD794Eu);
  CHECK(Crc32c("") == 0u);
  // TFRecord's mask: rotate right by 15, add 0xa282ead8 (modulo 2^32).
  CHECK(MaskCrc32c(0) == 0xA282EAD8u);
  CHECK(MaskCrc32c(0x00008000u) == 0xA282EAD9u);
}

TEST_CASE("TFRecord framing round-trips and refuses damaged or truncated records",
          "[tensorboard]") {
  const std::vector<std::string> data = {"", "a", std::string(1000, 'x'), "last"};
  std::string file;
  for (const auto& d : data) file += FrameRecord(d);
  CHECK(file.size() == 16 * data.size() + 1005);
  CHECK(ParseRecords(file) == data);
  // The length, little-endian, then its masked CRC.
  const std::string one = FrameRecord("a");
  CHECK(one.substr(0, 8) == std::string("\x01\0\0\0\0\0\0\0", 8));

  // Every single flipped byte is caught, by one CRC or the other (or a length out of range).
  for (std::size_t i = 0; i < one.size(); ++i) {
    std::string damaged = file.substr(0, 16) + one + file.substr(16 + one.size());
    damaged[16 + i] ^= 0x01;
    INFO("byte " << 16 + i);
    CHECK_THROWS_WITH(ParseRecords(damaged), Catch::Contains("TFRecord at byte 16"));
  }
  CHECK_THROWS_WITH(ParseRecords(file.substr(0, file.size() - 1)),
                    Catch::Contains("truncated data"));
  CHECK_THROWS_WITH(ParseRecords(file.substr(0, 16 + 5)), Catch::Contains("truncated header"));
}

TEST_CASE("metrics records become TensorBoard scalars under fixed tags", "[tensorboard]") {
  const auto step = ScalarsOfRecord({{"event", "step"},
                                     {"step", 7},
                                     {"loss", 1.5},
                                     {"accuracy", 0.25},
                                     {"lr", 0.1},
                                     {"images_per_sec", 900},
                                     {"world_size", 2}});
  REQUIRE(step.size() == 4);
  CHECK(step[0].tag == "loss/train");
  CHECK(step[0].value == 1.5f);
  CHECK(step[3].tag == "images_per_sec");
  CHECK(step[3].value == 900.0f);

  const auto no_eval = ScalarsOfRecord(
      {{"event", "epoch"}, {"train_loss", 1.0}, {"train_accuracy", 0.5}, {"images_per_sec", 10}});
  CHECK(no_eval.size() == 3);
  const auto eval = ScalarsOfRecord(
      {{"event", "epoch"}, {"train_loss", 1.0}, {"test_loss", 2.0}, {"test_accuracy", 0.75}});
  REQUIRE(eval.size() == 3);
  CHECK(eval[1].tag == "loss/test");
  CHECK(eval[2].tag == "accuracy/test");

  const auto recovery =
      ScalarsOfRecord({{"event", "recovery"}, {"seconds_lost", 0.25}, {"steps_redone", 0}});
  REQUIRE(recovery.size() == 2);
  CHECK(recovery[0].tag == "recovery/seconds_lost");

  CHECK(ScalarsOfRecord({{"event", "start"}, {"world_size", 2}}).empty());
  CHECK(ScalarsOfRecord({{"loss", 1.0}}).empty());
  CHECK(ScalarsOfRecord({{"event", "step"}, {"loss", "NaN?"}}).empty());
}

TEST_CASE("the TensorBoard writer's file decodes back to the version record and the scalars",
          "[tensorboard]") {
  TempDir tmp;
  const std::string dir = tmp.path() + "/tb/run";  // parents are created
  std::string path;
  {
    TensorBoardWriter writer(dir, 1700000000.5);
    path = writer.path();
    writer.Write(1, 1700000001.0, {{"loss/train", 2.5f}, {"lr", 0.1f}});
    writer.Write(2, 1700000002.0, {});  // nothing to show: nothing written
    writer.Write(3, 1700000003.0, {{"loss/train", 2.0f}});
  }
  CHECK(FilesIn(dir) == std::vector<std::string>{path});
  CHECK(std::filesystem::path(path).filename().string().rfind("events.out.tfevents.1700000000.",
                                                              0) == 0);
  const auto events = ReadEvents(path);
  REQUIRE(events.size() == 3);
  CHECK(events[0].file_version() == "brain.Event:2");
  CHECK(events[0].wall_time() == 1700000000.5);
  CHECK(events[1].step() == 1);
  CHECK(events[1].wall_time() == 1700000001.0);
  REQUIRE(events[1].summary().value_size() == 2);
  CHECK(events[1].summary().value(0).tag() == "loss/train");
  CHECK(events[1].summary().value(0).simple_value() == 2.5f);
  CHECK(events[1].summary().value(1).tag() == "lr");
  CHECK(events[2].step() == 3);
  CHECK(events[2].summary().value(0).simple_value() == 2.0f);
}

TEST_CASE("the TensorBoard writer marks where its file's steps start, once", "[tensorboard]") {
  TempDir tmp;
  std::string path;
  {
    TensorBoardWriter writer(tmp.path(), 1700000000.0);
    path = writer.path();
    writer.StartSession(17, 1700000001.0);
    writer.Write(17, 1700000002.0, {{"loss/train", 1.5f}});
    writer.StartSession(40, 1700000003.0);  // a file has one start
  }
  const auto events = ReadEvents(path);
  REQUIRE(events.size() == 3);
  CHECK(events[1].step() == 17);
  CHECK(events[1].wall_time() == 1700000001.0);
  REQUIRE(events[1].has_session_log());
  CHECK(events[1].session_log().status() == mxrun::tensorboard::SessionLog::START);
  CHECK(!events[1].has_summary());
  CHECK(events[2].step() == 17);
  CHECK(events[2].summary().value(0).simple_value() == 1.5f);
}

TEST_CASE("the TensorBoard writer names a folder it cannot create", "[tensorboard]") {
  TempDir tmp;
  std::ofstream(tmp.path() + "/file") << "x";
  CHECK_THROWS_WITH(TensorBoardWriter(tmp.path() + "/file/sub", 0),
                    Catch::Contains("cannot create --tensorboard_dir " + tmp.path() + "/file/sub"));
}

TEST_CASE("every metrics record carries the wall-clock time and reaches the sinks",
          "[tensorboard]") {
  TempDir tmp;
  const std::string path = tmp.path() + "/m.jsonl";
  double now = 100.25;
  std::vector<json> seen;
  {
    MetricsLog log(path, [&] { return now; });
    log.AddSink([&](const json& r) { seen.push_back(r); });
    log.Append({{"event", "step"}, {"step", 1}});
    now = 101.5;
    log.Append({{"event", "done"}, {"time", 5.0}});  // a time given is kept
  }
  std::istringstream lines(ReadAll(path));
  std::string line;
  std::vector<json> written;
  while (std::getline(lines, line)) written.push_back(json::parse(line));
  REQUIRE(written.size() == 2);
  CHECK(written[0]["time"] == 100.25);
  CHECK(written[1]["time"] == 5.0);
  CHECK(seen == written);

  // Without a file (ranks other than 0), sinks still see every record.
  MetricsLog quiet("", [] { return 1.0; });
  int records = 0;
  quiet.AddSink([&](const json&) { ++records; });
  quiet.Append({{"event", "start"}});
  CHECK(records == 1);
}
