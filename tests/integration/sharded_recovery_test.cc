// In-process recovery of sharded state (python/mxrun/_shard_copy.py, _shard_recovery.py):
// scripts/examples/fsdp2.py, FSDP2 on 2 CPU ranks over Gloo, under a real mxrun. A SIGKILLed
// rank's shards and their optimizer state come back from the copy its ring neighbour keeps, into
// a new process or a warm standby; the survivor keeps its own; every rank ends bit for bit where
// an undisturbed run ends (SHA-256 of each rank's shards and optimizer state).

#include <catch2/catch.hpp>

#include <signal.h>

#include <map>
#include <regex>
#include <string>
#include <vector>

#include "tests/python_workers.h"
#include "tests/subprocess.h"

using namespace std::chrono_literals;
using mxrun::testing::Describe;
using mxrun::testing::PidOfRank;
using mxrun::testing::ProcessResult;
using mxrun::testing::PythonWorkerEnv;
using mxrun::testing::Run;
using mxrun::testing::Subprocess;

namespace {

const std::string kScript = std::string(EXAMPLES_DIR) + "/fsdp2.py";
const std::vector<std::string> kSmall = {"--steps", "30", "--dim", "64", "--layers", "2",
                                         "--batch_size", "8"};

std::vector<std::string> Mxrun(std::vector<std::string> flags, std::vector<std::string> extra = {}) {
  return mxrun::testing::MxrunExample(kScript, flags, kSmall, extra);
}

// rank -> the digest of its shards and optimizer state at the end.
std::map<int, std::string> DigestsOf(const std::string& out) {
  std::map<int, std::string> digests;
  std::regex line("\\{\"event\": \"done\", \"rank\": ([0-9]+), \"state_sha256\": \"([0-9a-f]{64})\"\\}");
  for (auto it = std::sregex_iterator(out.begin(), out.end(), line); it != std::sregex_iterator();
       ++it) {
    digests[std::stoi((*it)[1])] = (*it)[2];
  }
  return digests;
}

// step -> how often rank 0 logged it.
std::map<int, int> StepCounts(const std::string& out) {
  std::map<int, int> count;
  std::regex line("\\{\"event\": \"step\", \"step\": ([0-9]+),");
  for (auto it = std::sregex_iterator(out.begin(), out.end(), line); it != std::sregex_iterator();
       ++it) {
    ++count[std::stoi((*it)[1])];
  }
  return count;
}

const ProcessResult& Undisturbed() {
  static const ProcessResult r = Run(Mxrun({}), PythonWorkerEnv(), 240s);
  return r;
}

// 4 ranks on 2-D meshes: HSDP (2 replica groups of 2 shards) and tensor parallel (2 x 2).
const std::vector<std::string> kSmall4 = {"--steps", "16", "--dim", "32", "--layers", "2",
                                          "--batch_size", "4"};

std::vector<std::string> Mxrun4(const std::string& mesh, std::vector<std::string> flags,
                                std::vector<std::string> extra = {}) {
  extra.insert(extra.begin(), {mesh, "2"});
  return mxrun::testing::MxrunExample(kScript, flags, kSmall4, extra, 4);
}

const ProcessResult& Undisturbed4(const std::string& mesh) {
  static std::map<std::string, ProcessResult> runs;
  if (!runs.count(mesh)) runs.emplace(mesh, Run(Mxrun4(mesh, {}), PythonWorkerEnv(), 300s));
  return runs.at(mesh);
}

// `r` ended as the undisturbed run `base` did, rank by rank, bit for bit, with each of its
// `steps` logged once (`redone`: at most that many steps logged twice).
void CheckSameAs(const ProcessResult& base, const ProcessResult& r, size_t ranks, size_t steps_in_all,
                 int redone) {
  INFO(Describe(base));
  REQUIRE(base.exit_code == 0);
  const std::map<int, std::string> want = DigestsOf(base.out);
  REQUIRE(want.size() == ranks);
  CHECK(want.at(0) != want.at(1));  // each rank its own shards
  CHECK(DigestsOf(r.out) == want);
  const std::map<int, int> steps = StepCounts(r.out);
  CHECK(steps.size() == steps_in_all);
  int twice = 0;
  for (const auto& [step, count] : steps) {
    CHECK(count <= 2);
    twice += count - 1;
  }
  CHECK(twice <= redone);
}

void CheckSameAsUndisturbed(const ProcessResult& r, int redone = 0) {
  CheckSameAs(Undisturbed(), r, 2, 30, redone);
}

}  // namespace

TEST_CASE("FSDP2 under mxrun.run: a SIGKILLed rank's new process gets its shards from its ring "
          "neighbour's copy, the survivor keeps its own, no step lost, bitwise as undisturbed",
          "[integration][sharded_recovery]") {
  ProcessResult r = Run(Mxrun({"--max_restarts=1"},
                              {"--kill_rank", "1", "--kill_step", "12", "--kill_after_forward"}),
                        PythonWorkerEnv(), 240s);
  INFO(Describe(r));
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.err, Catch::Contains("in-process restart: kept rank(s) 0"));
  CHECK_THAT(r.out, Catch::Contains("\"rank\": 1, \"pid\": "));
  CHECK(std::regex_search(r.out, std::regex("\\{\"event\": \"round\", \"rank\": 1, \"pid\": [0-9]+, "
                                            "\"from_step\": 11, \"restored_from\": \"memory\"")));
  CheckSameAsUndisturbed(r);
}

TEST_CASE("FSDP2 under mxrun.run: a warm standby takes the SIGKILLed rank with its shards",
          "[integration][sharded_recovery]") {
  Subprocess job(Mxrun({"--max_restarts=1", "--standby_workers=1"}, {"--step_sleep", "0.2"}),
                 PythonWorkerEnv());
  REQUIRE(job.WaitForStderr("ready to take a rank in-process", 1, 120s));
  REQUIRE(job.WaitForStdout("\"event\": \"step\"", 2, 120s));
  const int victim = PidOfRank(job.out(), 1);
  REQUIRE(victim > 0);
  REQUIRE(::kill(victim, SIGKILL) == 0);
  ProcessResult r = job.Wait(240s);
  INFO(Describe(r));
  REQUIRE(r.exit_code == 0);
  CHECK(std::regex_search(r.err, std::regex("started rank\\(s\\) 1 \\(standby pid [0-9]+\\)")));
  // Killed anywhere in a step: the copy of the step before may still have been on its way.
  CheckSameAsUndisturbed(r, 1);
}

TEST_CASE("FSDP2 under mxrun.run: a rank killed as a step begins, its last copy still on its way, "
          "goes back one step with the survivor's snapshot, bitwise as undisturbed",
          "[integration][sharded_recovery]") {
  ProcessResult r = Run(Mxrun({"--max_restarts=1"}, {"--kill_rank", "1", "--kill_step", "12"}),
                        PythonWorkerEnv(), 240s);
  INFO(Describe(r));
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("\"restored_from\": \"memory\""));
  CheckSameAsUndisturbed(r, 1);
}

TEST_CASE("HSDP under mxrun.run: a SIGKILLed rank's new process gets its shards from its replica "
          "peer, no copy kept, no step lost, bitwise as undisturbed",
          "[integration][sharded_recovery]") {
  ProcessResult r = Run(Mxrun4("--replicate", {"--max_restarts=1"},
                               {"--kill_rank", "3", "--kill_step", "8", "--kill_after_forward"}),
                        PythonWorkerEnv(), 300s);
  INFO(Describe(r));
  REQUIRE(r.exit_code == 0);
  CHECK(std::regex_search(r.err, std::regex("kept rank\\(s\\) 0 \\(pid [0-9]+\\), 1 \\(pid [0-9]+\\), "
                                            "2 \\(pid [0-9]+\\); started rank\\(s\\) 3")));
  CHECK(std::regex_search(r.out, std::regex("\\{\"event\": \"round\", \"rank\": 3, \"pid\": [0-9]+, "
                                            "\"from_step\": 7, \"restored_from\": \"memory\"")));
  CHECK_THAT(r.err, Catch::Contains("shard copy: none kept (HSDP: 2 replica groups"));
  CHECK_THAT(r.err, !Catch::Contains("exchanges (every"));
  const ProcessResult& base = Undisturbed4("--replicate");
  CheckSameAs(base, r, 4, 16, 0);
  const std::map<int, std::string> digests = DigestsOf(base.out);
  CHECK(digests.at(0) == digests.at(2));  // replicas hold the same shards
  CHECK(digests.at(1) == digests.at(3));
}

TEST_CASE("FSDP2 + tensor parallel on a 2 x 2 mesh under mxrun.run: a SIGKILLed rank's new process "
          "gets its shards from its ring neighbour's copy, bitwise as undisturbed",
          "[integration][sharded_recovery]") {
  ProcessResult r = Run(Mxrun4("--tp", {"--max_restarts=1"},
                               {"--kill_rank", "2", "--kill_step", "8", "--kill_after_forward"}),
                        PythonWorkerEnv(), 300s);
  INFO(Describe(r));
  REQUIRE(r.exit_code == 0);
  CHECK(std::regex_search(r.err, std::regex("kept rank\\(s\\) 0 \\(pid [0-9]+\\), 1 \\(pid [0-9]+\\), "
                                            "3 \\(pid [0-9]+\\); started rank\\(s\\) 2")));
  CHECK(std::regex_search(r.out, std::regex("\\{\"event\": \"round\", \"rank\": 2, \"pid\": [0-9]+, "
                                            "\"from_step\": 7, \"restored_from\": \"memory\"")));
  CHECK_THAT(r.err, Catch::Contains("exchanges (every 1 step(s))"));
  CheckSameAs(Undisturbed4("--tp"), r, 4, 16, 0);
}
