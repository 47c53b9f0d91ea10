// The bundled trainer's in-process restart under mxrun: a failed rank is replaced while the other
// workers keep their processes and give the group their state from memory, so no completed step
// is lost, every loss afterwards equals a run without the failure (same data order, same
// numerics) and the final state is bitwise that run's (the "done" record's state_sha256). One node
// with 2 and 4 workers, across 2 nodes, and a whole node lost in a 2:3 job. The agent's side with a
// plain test program is in in_process_restart_test.cc.

#include <catch2/catch.hpp>

#include <signal.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "tests/master.h"
#include "tests/subprocess.h"
#include "tests/trainer_runs.h"

using namespace std::chrono_literals;
using mxrun::testing::CheckTensorBoardEvents;
using mxrun::testing::Describe;
using mxrun::testing::Master;
using mxrun::testing::Metrics;
using mxrun::testing::ProcessResult;
using mxrun::testing::Run;
using mxrun::testing::SmallRun;
using mxrun::testing::Subprocess;
using mxrun::testing::TempDir;
using mxrun::testing::WorkerOfRank;
using nlohmann::json;

namespace {

const std::string kMxrun = MXRUN_BIN;

// 2 epochs of 2048 images in steps of 32 per worker, a metrics record and a checkpoint every
// few steps (the checkpoint must not be what the new rank resumes from).
const std::vector<std::string> kTrainArgs = {"--epochs",     "2", "--log_every", "1",
                                             "--ckpt_every", "4", "--no_eval"};

std::map<int, double> StepLosses(const TempDir& dir) {
  std::map<int, double> losses;
  for (const json& record : Metrics(dir, "step")) losses[record["step"]] = record["loss"];
  return losses;
}

// What one kill did: the recovery record and the kept workers' pids.
void CheckRecovered(const TempDir& dir, const std::map<int, double>& baseline, int world) {
  const auto recoveries = Metrics(dir, "recovery");
  REQUIRE(recoveries.size() == 1);
  CHECK(recoveries[0]["restored_from"] == "memory");
  CHECK(recoveries[0]["steps_redone"] == 0);
  CHECK(recoveries[0]["world_size"] == world);
  CHECK(recoveries[0]["seconds_lost"].get<double>() > 0);
  // Where the time went: four phases, none negative, that add up to the whole.
  REQUIRE(recoveries[0].contains("phases"));
  double phases_sum = 0;
  for (const char* phase : {"until_round", "join", "restore", "first_step"}) {
    INFO("phase " << phase);
    REQUIRE(recoveries[0]["phases"].contains(phase));
    CHECK(recoveries[0]["phases"][phase].get<double>() >= 0);
    phases_sum += recoveries[0]["phases"][phase].get<double>();
  }
  CHECK(phases_sum == Approx(recoveries[0]["seconds_lost"].get<double>()).margin(1e-3));
  const auto resumes = Metrics(dir, "resume");
  REQUIRE(resumes.size() == 1);
  CHECK(resumes[0]["from"] == "memory");
  CHECK(resumes[0]["step"].get<int>() >= 10);  // the last completed step, not a checkpoint's
  // Every step was trained once, with the uninterrupted run's loss.
  const auto losses = StepLosses(dir);
  CHECK(losses.size() == baseline.size());
  for (const auto& [step, loss] : baseline) {
    INFO("step " << step);
    REQUIRE(losses.count(step) == 1);
    CHECK(losses.at(step) == loss);
  }
}

// The run ends bit for bit where the uninterrupted one did: parameters, buffers and momentum
// (the "done" record's digest).
void CheckSameFinalState(const TempDir& dir, const TempDir& base) {
  const auto done = Metrics(dir, "done");
  const auto base_done = Metrics(base, "done");
  REQUIRE(done.size() == 1);
  REQUIRE(base_done.size() == 1);
  REQUIRE(base_done[0].contains("state_sha256"));
  CHECK(base_done[0]["state_sha256"].get<std::string>().size() == 64);
  CHECK(done[0]["state_sha256"] == base_done[0]["state_sha256"]);
}

// `standby`: a warm standby takes the rank (the kill waits until it is ready); otherwise there is
// none and a new process starts for it. The job with the kill also writes TensorBoard events
// (rank 0, kept), which TensorBoard's own reader must find equal to the metrics file.
void KillRankAndCheck(int nproc, int victim, bool standby) {
  TempDir base;
  ProcessResult first =
      Run(SmallRun({kMxrun, "--standalone", "--nproc_per_node=" + std::to_string(nproc), "train"},
                   base, kTrainArgs),
          {}, 240s);
  INFO(Describe(first));
  REQUIRE(first.exit_code == 0);

  TempDir dir;
  std::vector<std::string> args = kTrainArgs;
  args.insert(args.end(), {"--tensorboard_dir", dir.path() + "/tb"});
  Subprocess job(SmallRun(
      {kMxrun, "--standalone", "--nproc_per_node=" + std::to_string(nproc), "--max_restarts=1",
       "--standby_workers=" + std::string(standby ? "1" : "0"), "train"},
      dir, args));
  const int steps = 64 * 2 / nproc;
  REQUIRE(job.WaitForStdout("step 10/" + std::to_string(steps), 1, 120s));
  if (standby) REQUIRE(job.WaitForStderr("ready to take a rank in-process", 1, 120s));
  std::map<int, pid_t> before;
  for (int rank = 0; rank < nproc; ++rank) before[rank] = WorkerOfRank(job.pid(), rank);
  REQUIRE(before[victim] > 0);
  REQUIRE(::kill(before[victim], SIGKILL) == 0);
  ProcessResult r = job.Wait(240s);
  INFO(Describe(r));
  REQUIRE(r.exit_code == 0);
  // The others kept their processes; the victim's rank got a new one.
  for (int rank = 0; rank < nproc; ++rank) {
    if (rank == victim) continue;
    CHECK_THAT(r.err, Catch::Contains(std::to_string(rank) + " (pid " +
                                      std::to_string(before[rank]) + ")"));
    CHECK_THAT(r.err, Catch::Contains("train: rank " + std::to_string(rank) + ": "));
  }
  CHECK_THAT(r.err, Catch::Contains("; started rank(s) " + std::to_string(victim) +
                                    (standby ? " (standby pid " : " (pid ")));
  CheckRecovered(dir, StepLosses(base), nproc);
  CheckSameFinalState(dir, base);
  ProcessResult check = CheckTensorBoardEvents(dir.path() + "/tb", dir);
  INFO(Describe(check));
  REQUIRE(check.exit_code == 0);
  CHECK_THAT(check.out, Catch::Contains("1 recovery"));
}

// `count` agents of a dynamic job on `master` (node ranks 0, 1, ...), each with `nproc` trainer
// workers and no standby (each test says which path it takes).
std::vector<std::unique_ptr<Subprocess>> StartNodes(const Master& master, const TempDir& dir,
                                                    const std::string& id,
                                                    const std::string& nnodes, int count,
                                                    int nproc) {
  std::vector<std::unique_ptr<Subprocess>> nodes;
  for (int node = 0; node < count; ++node) {
    nodes.push_back(std::make_unique<Subprocess>(
        SmallRun({kMxrun, "--rdzv_backend=c10d", "--rdzv_endpoint=" + master.endpoint(),
                  "--rdzv_id=" + id, "--nnodes=" + nnodes, "--node_rank=" + std::to_string(node),
                  "--rdzv_conf=last_call_timeout=10", "--nproc_per_node=" + std::to_string(nproc),
                  "--max_restarts=1", "--standby_workers=0", "train"},
                 dir, kTrainArgs)));
  }
  return nodes;
}

// Waits for every node to finish and checks that they succeeded and that the group took its
// state from a kept worker's memory, losing no completed step.
void WaitAndCheckRecovered(std::vector<std::unique_ptr<Subprocess>>& nodes, const TempDir& dir) {
  for (auto& node : nodes) {
    ProcessResult r = node->Wait(240s);
    INFO(Describe(r));
    REQUIRE(r.exit_code == 0);
  }
  const auto recoveries = Metrics(dir, "recovery");
  REQUIRE(recoveries.size() == 1);
  CHECK(recoveries[0]["restored_from"] == "memory");
  CHECK(recoveries[0]["steps_redone"] == 0);
}

}  // namespace

TEST_CASE(
    "in-process restart: one of 2 workers SIGKILLed, the other keeps its process and "
    "no step is lost",
    "[trainer][in_process]") {
  KillRankAndCheck(2, 1, /*standby=*/false);
}

TEST_CASE("in-process restart: a warm standby takes the SIGKILLed rank", "[trainer][in_process]") {
  KillRankAndCheck(2, 1, /*standby=*/true);
}

TEST_CASE(
    "in-process restart: a standby that takes a rank and then fails writes that rank's "
    "error file",
    "[trainer][in_process]") {
  // Each local rank resumes from a folder of its own: rank 0's checkpoint is garbage, rank 1's
  // folder is empty. The ranks start only once the standby is ready (a file the test makes), so
  // rank 0 fails while rank 1, kept, waits for its state; the standby takes the failed place
  // in-process, started with local rank 0's arguments, reads the same garbage and fails too. Its
  // rank and error file came with the round notice, not with its start.
  TempDir dir;
  const std::string go = dir.path() + "/go";
  REQUIRE(std::filesystem::create_directories(dir.path() + "/ckpt0"));
  std::ofstream(dir.path() + "/ckpt0/checkpoint.pt") << "bit rot";
  const std::string wait_for_go =
      "if [ -z \"$MXRUN_STANDBY\" ]; then n=0; while [ ! -e '" + go +
      "' ] && [ $n -lt 2400 ]; do sleep 0.05; n=$((n+1)); done; fi; exec \"$0\" \"$@\"";
  Subprocess job({kMxrun,
                  "--standalone",
                  "--nproc_per_node=2",
                  "--max_restarts=1",
                  "--standby_workers=1",
                  "--log_dir=" + dir.path() + "/logs",
                  "--no_python",
                  "sh",
                  "-c",
                  wait_for_go,
                  TRAIN_BIN,
                  "--width",
                  "8",
                  "--synthetic_train",
                  "2048",
                  "--synthetic_test",
                  "512",
                  "--batch_size",
                  "32",
                  "--epochs",
                  "2",
                  "--no_eval",
                  "--ckpt_dir",
                  dir.path() + "/ckpt${local_rank}",
                  "--resume"});
  REQUIRE(job.WaitForStderr("ready to take a rank in-process", 1, 120s));
  std::ofstream(go).put('\n');
  ProcessResult r = job.Wait(240s);
  INFO(Describe(r));
  CHECK(r.exit_code != 0);
  CHECK_THAT(r.err, Catch::Contains("(standby pid "));
  CHECK_THAT(r.err, Catch::Contains("train: standby: a standby was given a rank"));
  // The kept rank had no state yet, but it had its rank: it says so, not "standby".
  CHECK_THAT(r.err, Catch::Contains("train: rank 1: "));
  // Round 0's rank 0 and the standby each wrote the trainer's message where the agent looks for
  // their rank's (it removed the file of a rank when it gave it).
  int error_files = 0;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(dir.path() + "/logs")) {
    if (entry.path().filename() == "error.json" &&
        mxrun::testing::ReadFile(entry.path().string())
                .find("std::runtime_error: cannot read checkpoint") != std::string::npos) {
      ++error_files;
    }
  }
  CHECK(error_files == 2);
}

TEST_CASE("in-process restart: one of 4 workers SIGKILLed, the other 3 keep their processes",
          "[trainer][in_process]") {
  KillRankAndCheck(4, 2, /*standby=*/false);
}

TEST_CASE(
    "in-process restart: a kept rank killed while the group re-forms, and the others leave the "
    "unfinished join for the newer round at once",
    "[trainer][in_process]") {
  // Found by the soak (issue 38): the kept ranks were joining round 1 (rank 0's store waiting in
  // Gloo's rendezvous for the new rank 1, still loading) when rank 2 died; round 2 came, but
  // rank 0 stayed in round 1's join until the trainer's --timeout (30 minutes), and so did the job.
  TempDir base;
  ProcessResult first =
      Run(SmallRun({kMxrun, "--standalone", "--nproc_per_node=3", "train"}, base, kTrainArgs), {},
          240s);
  INFO(Describe(first));
  REQUIRE(first.exit_code == 0);
  TempDir dir;
  Subprocess job(SmallRun({kMxrun, "--standalone", "--nproc_per_node=3", "--max_restarts=2",
                           "--standby_workers=0", "train"},
                          dir, kTrainArgs));
  REQUIRE(job.WaitForStdout("step 10/44", 1, 120s));
  const pid_t rank0 = WorkerOfRank(job.pid(), 0);
  const pid_t rank1 = WorkerOfRank(job.pid(), 1);
  const pid_t rank2 = WorkerOfRank(job.pid(), 2);
  REQUIRE(rank1 > 0);
  REQUIRE(rank2 > 0);
  REQUIRE(::kill(rank1, SIGKILL) == 0);
  // Round 1: ranks 0 and 2 kept and joining, rank 1's new process loading LibTorch.
  REQUIRE(job.WaitForStderr("; started rank(s) 1 (pid ", 1, 60s));
  REQUIRE(::kill(rank2, SIGKILL) == 0);
  ProcessResult r = job.Wait(240s);
  INFO(Describe(r));
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.err, Catch::Contains("kept rank(s) 0 (pid " + std::to_string(rank0) + ")"));
  CHECK_THAT(r.err, Catch::Contains("(2 of 2 restarts)"));
  // No completed step trained twice, and the end bit for bit the uninterrupted run's.
  for (const json& recovery : Metrics(dir, "recovery")) CHECK(recovery["steps_redone"] == 0);
  CheckSameFinalState(dir, base);
}

TEST_CASE(
    "in-process restart on one node: a kept rank silent in its join for a new process that "
    "loads longer than --hang_timeout is not judged hung",
    "[trainer][in_process]") {
  // Found as a weak spot of the soak (issue 38): a peer's grace held such verdicts only in a
  // multi-node job. The new rank-1 process sleeps 9 s before the trainer starts (a slow import);
  // rank 0, kept, waits silent in its join past the 8 s hang timeout.
  TempDir dir;
  Subprocess job(
      SmallRun({kMxrun, "--standalone", "--nproc_per_node=2", "--max_restarts=1",
                "--standby_workers=0", "--hang_timeout=8", "--no_python", "sh", "-c",
                "if [ \"$TORCHELASTIC_RESTART_COUNT\" != 0 ]; then sleep 9; fi; exec \"$0\" \"$@\"",
                TRAIN_BIN},
               dir, kTrainArgs));
  REQUIRE(job.WaitForStdout("step 10/64", 1, 120s));
  const pid_t rank0 = WorkerOfRank(job.pid(), 0);
  const pid_t rank1 = WorkerOfRank(job.pid(), 1);
  REQUIRE(rank1 > 0);
  REQUIRE(::kill(rank1, SIGKILL) == 0);
  ProcessResult r = job.Wait(240s);
  INFO(Describe(r));
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.err, Catch::Contains("kept rank(s) 0 (pid " + std::to_string(rank0) + ")"));
  CHECK_THAT(r.err, Catch::Contains("while rank(s) 1 still start (no heartbeat yet)"));
  CHECK_THAT(r.err, !Catch::Contains("no heartbeat for"));  // no hang verdict
  CHECK_THAT(r.err, Catch::Contains("(1 of 1 restarts)"));
  const auto recoveries = Metrics(dir, "recovery");
  REQUIRE(recoveries.size() == 1);
  CHECK(recoveries[0]["restored_from"] == "memory");
  CHECK(recoveries[0]["steps_redone"] == 0);
}

TEST_CASE(
    "in-process restart across 2 nodes: a worker of node 1 SIGKILLed, node 0's workers "
    "keep their processes",
    "[trainer][in_process]") {
  Master master;
  TempDir dir;
  auto nodes = StartNodes(master, dir, "ipr2", "2", 2, 2);
  REQUIRE(nodes[0]->WaitForStdout("step 10/32", 1, 120s));
  const pid_t rank0 = WorkerOfRank(nodes[0]->pid(), 0);
  const pid_t rank1 = WorkerOfRank(nodes[0]->pid(), 1);
  const pid_t rank3 = WorkerOfRank(nodes[1]->pid(), 3);
  REQUIRE(rank3 > 0);
  REQUIRE(::kill(rank3, SIGKILL) == 0);
  WaitAndCheckRecovered(nodes, dir);
  CHECK_THAT(nodes[0]->err(),
             Catch::Contains("in-process restart: kept rank(s) 0 (pid " + std::to_string(rank0) +
                             "), 1 (pid " + std::to_string(rank1) + "); started rank(s) none"));
  CHECK_THAT(nodes[1]->err(), Catch::Contains("; started rank(s) 3 (pid "));
  CHECK(Metrics(dir, "done").at(0)["step"] == 32);
}

TEST_CASE(
    "in-process restart after a node's death: a 2:3 job goes on at world size 2 with the "
    "survivors' processes",
    "[trainer][in_process]") {
  Master master;
  TempDir dir;
  auto nodes = StartNodes(master, dir, "ipr3", "2:3", 3, 1);
  // 3 workers: 2048 / 3 rounded up to whole steps of 32.
  REQUIRE(nodes[0]->WaitForStdout("step 10/44", 1, 120s));
  const pid_t rank0 = WorkerOfRank(nodes[0]->pid(), 0);
  const pid_t rank1 = WorkerOfRank(nodes[1]->pid(), 1);
  const pid_t rank2 = WorkerOfRank(nodes[2]->pid(), 2);
  REQUIRE(rank2 > 0);
  // The node dies: its agent and its worker at once.
  REQUIRE(::kill(nodes[2]->pid(), SIGKILL) == 0);
  REQUIRE(::kill(rank2, SIGKILL) == 0);
  nodes.pop_back();  // the dead node's agent: nothing to wait for
  WaitAndCheckRecovered(nodes, dir);
  CHECK_THAT(nodes[0]->err(), Catch::Contains("kept rank(s) 0 (pid " + std::to_string(rank0) +
                                              "); started rank(s) none"));
  CHECK_THAT(nodes[1]->err(), Catch::Contains("kept rank(s) 1 (pid " + std::to_string(rank1) +
                                              "); started rank(s) none"));
  CHECK(Metrics(dir, "recovery").at(0)["world_size"] == 2);
  // Both epochs end (the first went on where it stood, at the new world size).
  CHECK(Metrics(dir, "epoch").size() == 2);
}
