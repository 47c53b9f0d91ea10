// The bundled trainer end to end: under mxrun (two workers, Gloo over 127.0.0.1), killed and
// resumed from its checkpoint, under torchrun, alone, and its data sharding against PyTorch's own
// DistributedSampler. TRAIN_BIN and MXRUN_BIN are set by CMake. (On a GPU: trainer_gpu_test.cc.)

#include <catch2/catch.hpp>

#include <dirent.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "rendezvous/net.h"
#include "tests/subprocess.h"
#include "tests/trainer_runs.h"
#include "trainer/distributed_sampler.h"
#include "trainer/tensorboard_event.pb.h"
#include "trainer/tfrecord.h"

using namespace std::chrono_literals;
using mxrun::testing::CheckTensorBoardEvents;
using mxrun::testing::Describe;
using mxrun::testing::EnvOf;
using mxrun::testing::Metrics;
using mxrun::testing::NoLauncherEnv;
using mxrun::testing::ProcessResult;
using mxrun::testing::ReadFile;
using mxrun::testing::Run;
using mxrun::testing::SmallRun;
using mxrun::testing::Subprocess;
using mxrun::testing::TempDir;
using mxrun::testing::WorkerOfRank;
using nlohmann::json;

namespace {

const std::string kMxrun = MXRUN_BIN;
const std::string kTrain = TRAIN_BIN;

// The line of text that starts at the first occurrence of start, or "" when there is none.
std::string LineFrom(const std::string& text, const std::string& start) {
  const size_t at = text.find(start);
  if (at == std::string::npos) return "";
  return text.substr(at, text.find('\n', at) - at);
}

}  // namespace

TEST_CASE("mxrun --standalone --nproc_per_node=2 train learns the synthetic set to 90%",
          "[trainer]") {
  TempDir dir;
  std::vector<std::string> argv = SmallRun({kMxrun, "--standalone", "--nproc_per_node=2", "train"},
                                           dir, {"--epochs", "3", "--log_every", "0"});
  ProcessResult r = Run(argv, {}, 240s);
  INFO(Describe(r));
  REQUIRE(r.exit_code == 0);
  auto epochs = Metrics(dir, "epoch");
  REQUIRE(epochs.size() == 3);
  CHECK(epochs.back()["world_size"] == 2);
  CHECK(epochs.back()["test_samples"] == 512);  // the test split, sharded and summed exactly
  CHECK(epochs.back()["test_accuracy"].get<double>() >= 0.90);
  CHECK(epochs.back()["train_loss"].get<double>() < epochs.front()["train_loss"].get<double>());
  CHECK(r.out.find("[n0 r0] epoch 3/3 done") != std::string::npos);
  CHECK(r.out.find("[n0 r1]") == std::string::npos);  // only rank 0 reports progress
  // The bundled trainer gets hang detection by default.
  CHECK_THAT(r.err, Catch::Contains("hang detection: heartbeat (MXRUN_HEARTBEAT_FILE) silent over "
                                    "300 s"));
  // The trainer reports its steps on the control channel: the goodput line tells start-up from
  // training.
  CHECK_THAT(r.err, Catch::Contains("goodput "));
  CHECK_THAT(r.err, !Catch::Contains("no progress reports"));
}

TEST_CASE(
    "with --tensorboard_dir, rank 0 writes the metrics records' scalars as TensorBoard events",
    "[trainer]") {
  TempDir dir;
  const std::string tb = dir.path() + "/tb";
  std::vector<std::string> argv =
      SmallRun({kMxrun, "--standalone", "--nproc_per_node=2", "train"}, dir,
               {"--epochs", "1", "--max_steps", "6", "--log_every", "2", "--synthetic_test", "64",
                "--tensorboard_dir", tb});
  ProcessResult r = Run(argv, {}, 240s);
  INFO(Describe(r));
  REQUIRE(r.exit_code == 0);
  // One file: only rank 0 writes.
  std::vector<std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator(tb)) {
    files.push_back(entry.path().string());
  }
  REQUIRE(files.size() == 1);
  CHECK(r.out.find("TensorBoard events in " + files[0]) != std::string::npos);
  std::vector<mxrun::tensorboard::Event> events;
  for (const std::string& record : mxrun::trainer::ParseRecords(ReadFile(files[0]))) {
    events.emplace_back().ParseFromString(record);
  }
  REQUIRE(!events.empty());
  CHECK(events[0].file_version() == "brain.Event:2");
  // Every step record's loss is there, at its step and time; the epoch's test accuracy too.
  auto steps = Metrics(dir, "step");
  REQUIRE(steps.size() == 3);
  for (const json& record : steps) {
    bool found = false;
    for (const auto& event : events) {
      if (event.step() != record["step"] || event.summary().value_size() == 0) continue;
      if (event.summary().value(0).tag() != "loss/train") continue;
      found = true;
      CHECK(event.wall_time() == record["time"].get<double>());
      CHECK(event.summary().value(0).simple_value() == record["loss"].get<float>());
    }
    INFO("step " << record["step"]);
    CHECK(found);
  }
  const json epoch = Metrics(dir, "epoch").at(0);
  const auto& last = events.back().summary();
  REQUIRE(last.value_size() == 5);
  CHECK(last.value(4).tag() == "accuracy/test");
  CHECK(last.value(4).simple_value() == epoch["test_accuracy"].get<float>());
  // Every JSON record has the wall clock, in order.
  double previous = 0;
  for (const json& record : Metrics(dir, "")) {
    CHECK(record["time"].get<double>() >= previous);
    previous = record["time"].get<double>();
  }
  // TensorBoard itself reads every step and epoch scalar, as the metrics file has it.
  ProcessResult check = CheckTensorBoardEvents(tb, dir);
  INFO(Describe(check));
  REQUIRE(check.exit_code == 0);
  CHECK_THAT(check.out, Catch::Contains("records: 1 epoch, 3 step;"));
}

TEST_CASE("a worker killed mid-training is restarted and resumes from the checkpoint",
          "[trainer]") {
  TempDir dir;
  // 2 epochs of 32 steps; a checkpoint every 4 steps; a metrics line every step. Without
  // in-process restart (trainer_in_process_test.cc) every worker starts again, from the checkpoint.
  std::vector<std::string> argv =
      SmallRun({kMxrun, "--standalone", "--nproc_per_node=2", "--max_restarts=1", "train"}, dir,
               {"--epochs", "2", "--log_every", "1", "--ckpt_every", "4", "--no_eval",
                "--no_in_process_restart", "--tensorboard_dir", dir.path() + "/tb"});
  Subprocess job(argv);
  // Wait until training is well under way (a checkpoint exists), then SIGKILL rank 0: the
  // checkpoint writer, so a kill in the middle of a write is possible too. Rank 0 prints its
  // progress line for step 10 just before it appends that step's metrics record.
  REQUIRE(job.WaitForStdout("step 10/64", 1, 120s));
  const pid_t rank0 = WorkerOfRank(job.pid(), 0);
  REQUIRE(rank0 > 0);
  REQUIRE(::kill(rank0, SIGKILL) == 0);

  ProcessResult r = job.Wait(240s);
  INFO(Describe(r));
  REQUIRE(r.exit_code == 0);
  auto resumes = Metrics(dir, "resume");
  REQUIRE(resumes.size() == 1);
  const int resumed_at = resumes[0]["step"].get<int>();
  CHECK(resumed_at >= 8);      // at least the checkpoint seen before the kill
  CHECK(resumed_at % 4 == 0);  // a checkpoint boundary
  CHECK(resumes[0]["restart_count"] == 1);
  auto starts = Metrics(dir, "start");
  REQUIRE(starts.size() == 2);
  auto done = Metrics(dir, "done");
  REQUIRE(done.size() == 1);
  CHECK(done[0]["step"] == starts[0]["planned_steps"]);  // finished at the planned step count
  CHECK(done[0]["step"] == 64);
  CHECK(done[0]["samples_seen"] == 64 * 32 * 2);
  // The second attempt started from the checkpoint, not from step 1.
  int first_step_after_resume = -1;
  bool after = false;
  for (const json& record : Metrics(dir, "")) {
    if (record["event"] == "resume") after = true;
    if (after && record["event"] == "step") {
      first_step_after_resume = record["step"];
      break;
    }
  }
  CHECK(first_step_after_resume == resumed_at + 1);
  CHECK(r.err.find("restart") != std::string::npos);
  // Bit for bit where the same job without the kill ends (parameters, buffers, momentum): the
  // steps after the checkpoint were trained again with the same data and numerics.
  {
    TempDir base;
    ProcessResult undisturbed =
        Run(SmallRun({kMxrun, "--standalone", "--nproc_per_node=2", "train"}, base,
                     {"--epochs", "2", "--log_every", "1", "--ckpt_every", "4", "--no_eval",
                      "--no_in_process_restart"}),
            {}, 240s);
    INFO(Describe(undisturbed));
    REQUIRE(undisturbed.exit_code == 0);
    const auto base_done = Metrics(base, "done");
    REQUIRE(base_done.size() == 1);
    CHECK(done[0]["state_sha256"] == base_done[0]["state_sha256"]);
  }
  // What the failure cost, from the progress marker beside the checkpoint: the steps completed
  // after the checkpoint. The last one may have completed without its record (the kill can fall
  // between the marker's write and the record's), so it is the last logged step or one more.
  int last_logged = -1;
  for (const json& record : Metrics(dir, "")) {
    if (record["event"] == "resume") break;
    if (record["event"] == "step") last_logged = record["step"];
  }
  const auto recoveries = Metrics(dir, "recovery");
  REQUIRE(recoveries.size() == 1);
  CHECK(recoveries[0]["restored_from"] == "checkpoint");
  CHECK(recoveries[0]["step"] == resumed_at + 1);
  CHECK(recoveries[0]["seconds_lost"].get<double>() > 0);
  REQUIRE(recoveries[0].contains("steps_redone"));
  const int redone = recoveries[0]["steps_redone"];
  INFO("last logged step " << last_logged << ", resumed at " << resumed_at);
  CHECK(last_logged >= 9);  // step 10 was printed; its record may not have been written
  CHECK((redone == last_logged - resumed_at || redone == last_logged + 1 - resumed_at));
  // TensorBoard: each rank 0 process wrote a file that starts (SessionLog START) at its first
  // step, the restarted one's at the step after the checkpoint, so the steps trained again show
  // once (checked with TensorBoard's own reader below).
  std::map<std::string, std::vector<std::int64_t>> starts_by_file;
  for (const auto& entry : std::filesystem::directory_iterator(dir.path() + "/tb")) {
    auto& starts = starts_by_file[entry.path().filename().string()];
    for (const std::string& record : mxrun::trainer::ParseRecords(ReadFile(entry.path()))) {
      mxrun::tensorboard::Event event;
      REQUIRE(event.ParseFromString(record));
      if (event.has_session_log()) {
        CHECK(event.session_log().status() == mxrun::tensorboard::SessionLog::START);
        starts.push_back(event.step());
      }
    }
  }
  REQUIRE(starts_by_file.size() == 2);
  std::vector<std::vector<std::int64_t>> session_starts;
  for (const auto& [file, file_starts] : starts_by_file) session_starts.push_back(file_starts);
  // By first step: the first process's file first.
  std::sort(session_starts.begin(), session_starts.end());
  CHECK(session_starts[0] == std::vector<std::int64_t>{1});
  CHECK(session_starts[1] == std::vector<std::int64_t>{resumed_at + 1});
  // TensorBoard itself shows every step once, with the newer run's values, and the recovery.
  ProcessResult check = CheckTensorBoardEvents(dir.path() + "/tb", dir);
  INFO(Describe(check));
  REQUIRE(check.exit_code == 0);
  CHECK_THAT(check.out, Catch::Contains("1 recovery"));
}

TEST_CASE("a trainer rank that stops is found by its heartbeat, and the job resumes",
          "[trainer][hang]") {
  TempDir dir;
  std::vector<std::string> argv = SmallRun(
      {kMxrun, "--standalone", "--nproc_per_node=2", "--max_restarts=1", "--hang_timeout=5",
       "--term_timeout=5", "--log_dir=" + dir.path() + "/logs", "train"},
      dir, {"--epochs", "2", "--log_every", "1", "--ckpt_every", "4", "--no_eval"});
  Subprocess job(argv);
  REQUIRE(job.WaitForStdout("step 10/64", 1, 120s));
  const pid_t rank1 = WorkerOfRank(job.pid(), 1);
  REQUIRE(rank1 > 0);
  // The trainer beats after every step: its heartbeat file is there.
  const std::string heartbeat = EnvOf(rank1, "MXRUN_HEARTBEAT_FILE");
  CHECK_THAT(heartbeat, Catch::EndsWith("/attempt_0/1/heartbeat"));
  CHECK(::access(heartbeat.c_str(), F_OK) == 0);
  // Rank 1 stops (as under a debugger); rank 0 blocks in its next all-reduce: a step that blocks.
  REQUIRE(::kill(rank1, SIGSTOP) == 0);

  ProcessResult r = job.Wait(240s);
  INFO(Describe(r));
  CHECK(r.exit_code == 0);
  // Rank 1 is the one named: past the timeout itself, or, when rank 0's last beat came first (it
  // waited in the all-reduce rank 1 never reached), as the stopped rank the silent one waits for.
  const std::string named =
      "worker rank 1 (local_rank 1, pid " + std::to_string(rank1) + ") failed: hung (heartbeat): ";
  const std::string line = LineFrom(r.err, named);
  REQUIRE_FALSE(line.empty());
  CHECK_THAT(line,
             Catch::StartsWith(named + "no heartbeat for ") ||
                 Catch::StartsWith(named + "cannot run (stopped or in uninterruptible sleep)"));
  CHECK_THAT(line, Catch::Contains("no heartbeat for "));
  CHECK_THAT(r.err, Catch::Contains("is hung (heartbeat)"));
  // Rank 0 is diagnosed too when its last beat fell within the together-window of rank 1's (it
  // waits in the all-reduce); otherwise it is kept and takes the next round in-process.
  const std::string diag_line = LineFrom(r.err, "hang diagnostics of rank 1");
  REQUIRE_FALSE(diag_line.empty());
  CHECK_THAT(
      diag_line,
      Catch::StartsWith("hang diagnostics of rank 1 written to " + dir.path() + "/logs/") ||
          Catch::StartsWith("hang diagnostics of rank 1, 0 written to " + dir.path() + "/logs/"));
  auto resumes = Metrics(dir, "resume");
  REQUIRE(resumes.size() == 1);
  CHECK(resumes[0]["restart_count"] == 1);
  auto done = Metrics(dir, "done");
  REQUIRE(done.size() == 1);
  CHECK(done[0]["step"] == 64);
}

TEST_CASE("a resume at another world size continues from the same samples seen", "[trainer]") {
  TempDir dir;
  // One process, 10 steps of 32: 320 samples seen, then two workers carry on for 4 steps of 64.
  std::vector<std::string> alone =
      SmallRun({kTrain}, dir, {"--epochs", "2", "--max_steps", "10", "--no_eval"});
  ProcessResult first = Run(alone, NoLauncherEnv(), 120s);
  INFO(Describe(first));
  REQUIRE(first.exit_code == 0);
  std::vector<std::string> two =
      SmallRun({kMxrun, "--standalone", "--nproc_per_node=2", "train"}, dir,
               {"--epochs", "2", "--max_steps", "14", "--no_eval", "--resume"});
  ProcessResult second = Run(two, {}, 120s);
  INFO(Describe(second));
  REQUIRE(second.exit_code == 0);
  auto resumes = Metrics(dir, "resume");
  REQUIRE(resumes.size() == 1);
  CHECK(resumes[0]["from_world_size"] == 1);
  CHECK(resumes[0]["world_size"] == 2);
  CHECK(resumes[0]["samples_seen"] == 320);
  auto done = Metrics(dir, "done");
  REQUIRE(done.size() == 2);
  CHECK(done[1]["step"] == 14);
  CHECK(done[1]["samples_seen"] == 320 + 4 * 64);
}

TEST_CASE("train runs unchanged under torchrun's static rendezvous (agent store)",
          "[trainer][torchrun]") {
  TempDir dir;
  auto port = mxrun::PickFreePort("127.0.0.1");
  REQUIRE(port.ok());
  std::vector<std::string> argv = SmallRun(
      {TORCHRUN_BIN, "--nproc_per_node=2", "--master_addr=127.0.0.1",
       "--master_port=" + std::to_string(*port), "--monitor_interval=0.2", "--no_python", kTrain},
      dir, {"--epochs", "1", "--max_steps", "6", "--log_every", "3", "--synthetic_test", "64"});
  ProcessResult r = Run(argv, {}, 240s);
  INFO(Describe(r));
  REQUIRE(r.exit_code == 0);
  auto done = Metrics(dir, "done");
  REQUIRE(done.size() == 1);
  CHECK(done[0]["step"] == 6);
  CHECK(Metrics(dir, "start").at(0)["world_size"] == 2);
}

TEST_CASE("train runs alone as one process", "[trainer]") {
  TempDir dir;
  std::vector<std::string> argv =
      SmallRun({kTrain}, dir, {"--epochs", "1", "--max_steps", "3", "--synthetic_test", "64"});
  ProcessResult r = Run(argv, NoLauncherEnv(), 120s);
  INFO(Describe(r));
  REQUIRE(r.exit_code == 0);
  CHECK(Metrics(dir, "start").at(0)["world_size"] == 1);
  CHECK(Metrics(dir, "done").at(0)["step"] == 3);
}

TEST_CASE("alone with --backend gloo, train reduces over a one-rank group and trains the same",
          "[trainer]") {
  // What DDP does at world size 1, and how the GPU tests reach NCCL with one GPU. The one-rank
  // group needs no MASTER_ADDR or MASTER_PORT; its sums equal their one term, so every loss is
  // the one the run without a group sees.
  std::vector<json> losses[2];
  const char* backends[2] = {"auto", "gloo"};
  for (int i = 0; i < 2; ++i) {
    TempDir dir;
    std::vector<std::string> argv =
        SmallRun({kTrain}, dir,
                 {"--epochs", "1", "--max_steps", "4", "--log_every", "1", "--no_eval", "--threads",
                  "1", "--backend", backends[i]});
    ProcessResult r = Run(argv, NoLauncherEnv(), 120s);
    INFO(backends[i] << ": " << Describe(r));
    REQUIRE(r.exit_code == 0);
    CHECK(Metrics(dir, "start").at(0)["backend"] == (i == 0 ? "none" : "gloo"));
    for (const json& step : Metrics(dir, "step")) losses[i].push_back(step["loss"]);
  }
  REQUIRE(losses[0].size() == 4);
  CHECK(losses[1] == losses[0]);
}

TEST_CASE("a failing trainer reports through the error file into mxrun's summary", "[trainer]") {
  TempDir dir;
  ProcessResult r = Run({kMxrun, "--standalone", "--nproc_per_node=1", "train", "--data_dir",
                         dir.path() + "/missing", "--ckpt_dir", ""},
                        {}, 120s);
  INFO(Describe(r));
  CHECK(r.exit_code == 1);
  CHECK(r.err.find("cannot open CIFAR-10 file " + dir.path() + "/missing/data_batch_1.bin") !=
        std::string::npos);
  CHECK(r.err.find("std::runtime_error") != std::string::npos);
}

TEST_CASE("bad trainer flags exit 2 with the accepted values", "[trainer]") {
  ProcessResult r = Run({kTrain, "--model", "resnet20"}, {}, 60s);
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("resnet18") != std::string::npos);
  ProcessResult env =
      Run({kTrain}, {{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", ""}, {"MASTER_PORT", ""}},
          60s);
  CHECK(env.exit_code == 2);
  CHECK(env.err.find("MASTER_ADDR and MASTER_PORT") != std::string::npos);
}

TEST_CASE("sharding equals torch.utils.data.DistributedSampler index for index",
          "[trainer][sampler]") {
  struct Case {
    int n, world;
    bool drop_last;
    int seed;
  };
  const std::vector<Case> cases{{100, 1, false, 0}, {100, 3, false, 0},   {101, 4, false, 7},
                                {101, 4, true, 7},  {50000, 8, false, 0}, {10, 16, false, 3},
                                {37, 5, true, 1}};
  // Python prints one JSON object: key "n/world/drop/seed/rank/epoch" -> index list.
  std::string script =
      "import json, torch\n"
      "from torch.utils.data import DistributedSampler\n"
      "out = {}\n"
      "for n, w, d, s in ";
  script += "[";
  for (const Case& c : cases) {
    script += "(" + std::to_string(c.n) + "," + std::to_string(c.world) + "," +
              (c.drop_last ? "True" : "False") + "," + std::to_string(c.seed) + "),";
  }
  script +=
      "]:\n"
      "  for r in range(w):\n"
      "    smp = DistributedSampler(range(n), num_replicas=w, rank=r, shuffle=True, seed=s, "
      "drop_last=d)\n"
      "    for e in (0, 1, 5):\n"
      "      smp.set_epoch(e)\n"
      "      out[f'{n}/{w}/{int(d)}/{s}/{r}/{e}'] = list(smp)\n"
      "print(json.dumps(out))\n";
  ProcessResult r = Run({PYTHON_BIN, "-c", script}, {}, 120s);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  json expected = json::parse(r.out);
  int compared = 0;
  for (const Case& c : cases) {
    for (int rank = 0; rank < c.world; ++rank) {
      for (int epoch : {0, 1, 5}) {
        mxrun::trainer::SamplerConfig config{
            c.n, c.world, rank, true, static_cast<uint64_t>(c.seed), c.drop_last};
        const std::string key = std::to_string(c.n) + "/" + std::to_string(c.world) + "/" +
                                std::to_string(int{c.drop_last}) + "/" + std::to_string(c.seed) +
                                "/" + std::to_string(rank) + "/" + std::to_string(epoch);
        INFO(key);
        REQUIRE(mxrun::trainer::ShardIndices(config, epoch) ==
                expected[key].get<std::vector<int64_t>>());
        ++compared;
      }
    }
  }
  CHECK(compared == 3 * (1 + 3 + 4 + 4 + 8 + 16 + 5));
}
