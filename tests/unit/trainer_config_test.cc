// The trainer's small pure parts: options, learning-rate schedule, bucket plan, error file.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>
#include <stdexcept>

#include "trainer/bucket_plan.h"
#include "trainer/error_file.h"
#include "trainer/lr_schedule.h"
#include "trainer/options.h"

using namespace mxrun::trainer;

namespace {

ParsedTrainerArgs Parse(std::vector<std::string> args) {
  args.insert(args.begin(), "train");
  std::vector<const char*> argv;
  for (const auto& a : args) argv.push_back(a.c_str());
  return ParseTrainerOptions(static_cast<int>(argv.size()), argv.data());
}

std::string ParseError(std::vector<std::string> args) {
  try {
    Parse(std::move(args));
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace

TEST_CASE("the seed configuration's flags parse in both spellings", "[trainer_options]") {
  auto parsed = Parse({"--model",
                       "resnet50",
                       "--num_classes",
                       "10",
                       "--batch-size",
                       "128",
                       "--epochs",
                       "100",
                       "--lr",
                       "0.1",
                       "--momentum",
                       "0.9",
                       "--weight_decay",
                       "1e-4",
                       "--backend",
                       "gloo",
                       "--grad_accum",
                       "4",
                       "--milestones",
                       "30,60",
                       "--no_decay_bn_bias",
                       "--schedule",
                       "step"});
  REQUIRE(parsed.options);
  const TrainerOptions& o = *parsed.options;
  CHECK(o.model == "resnet50");
  CHECK(o.batch_size == 128);
  CHECK(o.epochs == 100);
  CHECK(o.lr == 0.1);
  CHECK(o.weight_decay == 1e-4);
  CHECK(o.backend == "gloo");
  CHECK(o.grad_accum == 4);
  CHECK(o.milestones == std::vector<double>{30, 60});
  CHECK(o.no_decay_bn_bias);
  CHECK(o.schedule == ScheduleKind::kStep);
}

TEST_CASE("a flag given twice takes its last value, as argparse does", "[trainer_options]") {
  auto parsed = Parse({"--epochs", "3", "--epochs", "5", "--milestones", "1,2"});
  REQUIRE(parsed.options);
  CHECK(parsed.options->epochs == 5);
  CHECK(parsed.options->milestones == std::vector<double>{1, 2});
}

TEST_CASE("bad trainer flags are errors that say what is accepted", "[trainer_options]") {
  CHECK_THAT(ParseError({"--model", "resnet20"}), Catch::Contains("resnet18"));
  CHECK_THAT(ParseError({"--batch_size", "0"}), Catch::Contains("batch_size"));
  CHECK_THAT(ParseError({"--amp", "fp16", "--device", "cpu"}), Catch::Contains("needs a CUDA"));
  CHECK_THAT(ParseError({"--backend", "mpi"}), Catch::Contains("backend"));
  CHECK_THAT(ParseError({"--bogus"}), Catch::Contains("--bogus"));
  CHECK_THAT(ParseError({"--warmup_epochs", "5", "--epochs", "5"}),
             Catch::Contains("must be less than --epochs"));
}

TEST_CASE("help returns the help text instead of options", "[trainer_options]") {
  auto parsed = Parse({"--help"});
  CHECK_FALSE(parsed.options);
  CHECK_THAT(parsed.help_text, Catch::Contains("--batch_size"));
}

TEST_CASE("the cosine schedule warms up linearly and decays to the floor", "[lr]") {
  LrSchedule s;
  s.base_lr = 0.4;
  s.warmup_epochs = 2;
  s.total_epochs = 10;
  CHECK(s.At(1.0) == Approx(0.2));
  CHECK(s.At(2.0) == Approx(0.4));
  CHECK(s.At(6.0) == Approx(0.2));
  CHECK(s.At(10.0) == Approx(0.0).margin(1e-12));
  CHECK(s.At(0.0) > 0.0);
}

TEST_CASE("the step schedule multiplies by gamma at each milestone", "[lr]") {
  LrSchedule s;
  s.base_lr = 1.0;
  s.kind = ScheduleKind::kStep;
  s.milestones = {3, 6};
  s.gamma = 0.1;
  CHECK(s.At(2.99) == Approx(1.0));
  CHECK(s.At(3.0) == Approx(0.1));
  CHECK(s.At(7.0) == Approx(0.01));
}

TEST_CASE("buckets fill in reverse registration order with a small first bucket", "[buckets]") {
  // Parameters of 0.5 MiB each: the first bucket closes at 1 MiB (two), the rest at 2 MiB (four).
  std::vector<ParamInfo> params(8, ParamInfo{512 * 1024, 0});
  auto buckets = PlanBuckets(params, 1 << 20, 2 << 20);
  REQUIRE(buckets.size() == 3);
  CHECK(buckets[0] == std::vector<int>{7, 6});
  CHECK(buckets[1] == std::vector<int>{5, 4, 3, 2});
  CHECK(buckets[2] == std::vector<int>{1, 0});
}

TEST_CASE("parameters of different dtypes never share a bucket", "[buckets]") {
  std::vector<ParamInfo> params{{10, 0}, {10, 1}, {10, 0}, {10, 1}};
  auto buckets = PlanBuckets(params, 1 << 20, 1 << 20);
  REQUIRE(buckets.size() == 2);
  for (const auto& b : buckets) {
    for (int i : b) CHECK(params[i].dtype_and_device == params[b[0]].dtype_and_device);
  }
}

TEST_CASE("the error file has the shape of PyTorch's @record", "[error_file]") {
  auto doc = nlohmann::json::parse(
      ErrorFileJson("std::runtime_error", "disk full", "in the C++ trainer", 1700000000));
  CHECK(doc["message"]["message"] == "std::runtime_error: disk full");
  CHECK(doc["message"]["extraInfo"]["py_callstack"] == "in the C++ trainer");
  CHECK(doc["message"]["extraInfo"]["timestamp"] == "1700000000");
  // Invalid UTF-8 in an exception text does not stop the report.
  CHECK_NOTHROW(nlohmann::json::parse(ErrorFileJson("E", "bad \xff byte", "", 0)));
}
