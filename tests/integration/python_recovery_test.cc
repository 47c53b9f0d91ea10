// In-process recovery of an ordinary PyTorch DDP script through the mxrun module (mxrun.run):
// scripts/examples/elastic_ddp.py under a real mxrun, Gloo on CPU. A SIGKILLed rank is replaced
// (by a new process, or a warm standby) while the survivor keeps its process and its state, and
// the job ends exactly where an undisturbed run ends: every step trained once, with the same loss,
// and the same parameters on every rank. Under torchrun the same script runs unchanged.

#include <catch2/catch.hpp>

#include <signal.h>

#include <map>
#include <set>
#include <regex>
#include <string>

#include "tests/free_port.h"
#include "tests/python_workers.h"
#include "tests/subprocess.h"

using namespace std::chrono_literals;
using mxrun::testing::CountOccurrences;
using mxrun::testing::Describe;
using mxrun::testing::ProcessResult;
using mxrun::testing::PythonWorkerEnv;
using mxrun::testing::Run;
using mxrun::testing::Subprocess;

namespace {

const std::string kScript = std::string(EXAMPLES_DIR) + "/elastic_ddp.py";
const std::vector<std::string> kSmall = {"--steps", "120", "--width", "8", "--batch_size", "16",
                                         "--images", "1024"};


std::vector<std::string> Mxrun(std::vector<std::string> flags, std::vector<std::string> extra = {}) {
  std::vector<std::string> argv{MXRUN_BIN, "--standalone", "--nproc_per_node=2"};
  argv.insert(argv.end(), flags.begin(), flags.end());
  argv.push_back(kScript);
  argv.insert(argv.end(), kSmall.begin(), kSmall.end());
  argv.insert(argv.end(), extra.begin(), extra.end());
  return argv;
}

// Step -> the loss rank 0 logged for it (as printed), and how often each step was logged.
struct Steps {
  std::map<int, std::string> loss;
  std::map<int, int> count;
};
Steps StepsOf(const std::string& out) {
  Steps s;
  std::regex line("\\{\"event\": \"step\", \"step\": ([0-9]+), \"time\": [0-9.]+, \"loss\": ([-0-9.e]+)\\}");
  for (auto it = std::sregex_iterator(out.begin(), out.end(), line); it != std::sregex_iterator();
       ++it) {
    const int step = std::stoi((*it)[1]);
    s.loss[step] = (*it)[2];
    ++s.count[step];
  }
  return s;
}

// rank -> the parameter sum it printed at the end.
std::map<int, std::string> ParamsOf(const std::string& out) {
  std::map<int, std::string> params;
  std::regex line("\\{\"event\": \"done\", \"rank\": ([0-9]+), \"params\": \"([-0-9.e]+)\"\\}");
  for (auto it = std::sregex_iterator(out.begin(), out.end(), line); it != std::sregex_iterator();
       ++it) {
    params[std::stoi((*it)[1])] = (*it)[2];
  }
  return params;
}

int PidOfRank(const std::string& out, int rank) {
  std::smatch m;
  std::regex line("\\{\"event\": \"round\", \"rank\": " + std::to_string(rank) +
                  ", \"pid\": ([0-9]+)");
  return std::regex_search(out, m, line) ? std::stoi(m[1]) : -1;
}

// What an undisturbed job logged: every step once, the same parameters on both ranks.
const ProcessResult& Undisturbed() {
  static const ProcessResult r = Run(Mxrun({}), PythonWorkerEnv(), 240s);
  return r;
}

// The recovered job ended where the undisturbed one did.
void CheckSameAsUndisturbed(const ProcessResult& r) {
  const ProcessResult& base = Undisturbed();
  INFO(Describe(base));
  REQUIRE(base.exit_code == 0);
  const Steps want = StepsOf(base.out), got = StepsOf(r.out);
  REQUIRE(want.loss.size() == 120);
  CHECK(got.loss.size() == 120);
  for (const auto& [step, count] : got.count) {
    INFO("step " << step);
    CHECK(count == 1);  // no completed step trained twice
    CHECK(got.loss.at(step) == want.loss.at(step));
  }
  const auto params = ParamsOf(r.out);
  REQUIRE(params.size() == 2);
  CHECK(params.at(0) == params.at(1));
  CHECK(params.at(0) == ParamsOf(base.out).at(0));
}

}  // namespace

TEST_CASE("mxrun.run: a SIGKILLed rank of a Python DDP job gets a new process, the survivor keeps "
          "its own and its state, no step is lost",
          "[integration][python_recovery]") {
  ProcessResult r = Run(Mxrun({"--max_restarts=1"}, {"--kill_rank", "1", "--kill_step", "12"}),
                        PythonWorkerEnv(), 240s);
  INFO(Describe(r));
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.err, Catch::Contains("in-process restart: kept rank(s) 0"));
  CHECK_THAT(r.err, Catch::Contains("taking round 1 in-process as rank 0 of 2"));
  CHECK(CountOccurrences(r.out, "\"event\": \"round\", \"rank\": 0, \"pid\": " +
                                    std::to_string(PidOfRank(r.out, 0))) == 2);  // one process
  CHECK_THAT(r.out, Catch::Contains("\"from_step\": 11, \"restored_from\": \"memory\""));
  CheckSameAsUndisturbed(r);
}

TEST_CASE("mxrun.run: with a fixed --master_port, rank 0 (the store's host) SIGKILLed is replaced "
          "too, and a survivor that hosted it hosts the next round on the same port",
          "[integration][python_recovery]") {
  std::set<int> taken;
  for (const std::string victim : {"0", "1"}) {
    INFO("victim: rank " << victim);
    const std::string port = std::to_string(mxrun::testing::DistinctFreePort(taken));
    ProcessResult r = Run({MXRUN_BIN, "--nproc_per_node=2", "--master_port=" + port,
                           "--max_restarts=1", kScript, "--steps", "30", "--width", "8",
                           "--batch_size", "16", "--images", "1024", "--kill_rank", victim,
                           "--kill_step", "12"},
                          PythonWorkerEnv(), 240s);
    INFO(Describe(r));
    REQUIRE(r.exit_code == 0);
    CHECK_THAT(r.err, Catch::Contains("in-process restart: kept rank(s) " +
                                      std::string(victim == "0" ? "1" : "0")));
    const Steps got = StepsOf(r.out);
    CHECK(got.loss.size() == 30);
    for (const auto& [step, count] : got.count) CHECK(count == 1);
    const auto params = ParamsOf(r.out);
    REQUIRE(params.size() == 2);
    CHECK(params.at(0) == params.at(1));
  }
}

TEST_CASE("mxrun.run: a warm standby takes the SIGKILLed rank of a Python DDP job",
          "[integration][python_recovery]") {
  Subprocess job(Mxrun({"--max_restarts=1", "--standby_workers=1"}), PythonWorkerEnv());
  REQUIRE(job.WaitForStderr("ready to take a rank in-process", 1, 120s));
  REQUIRE(job.WaitForStdout("\"event\": \"step\"", 1, 120s));
  const int victim = PidOfRank(job.out(), 1);
  REQUIRE(victim > 0);
  REQUIRE(::kill(victim, SIGKILL) == 0);
  ProcessResult r = job.Wait(240s);
  INFO(Describe(r));
  REQUIRE(r.exit_code == 0);
  CHECK(std::regex_search(r.err, std::regex("started rank\\(s\\) 1 \\(standby pid [0-9]+\\)")));
  CheckSameAsUndisturbed(r);
}

TEST_CASE("the script that uses mxrun.run runs unchanged under torchrun, to the same parameters",
          "[integration][python_recovery]") {
  std::map<std::string, std::string> env = PythonWorkerEnv();
  env["TORCH_DISABLE_SHARE_RDZV_TCP_STORE"] = "1";
  std::vector<std::string> argv{TORCHRUN_BIN, "--standalone", "--nproc_per_node=2", kScript};
  argv.insert(argv.end(), kSmall.begin(), kSmall.end());
  ProcessResult r = Run(argv, env, 240s);
  INFO(Describe(r));
  REQUIRE(r.exit_code == 0);
  CheckSameAsUndisturbed(r);
  CHECK_THAT(r.err, !Catch::Contains("mxrun:"));
}
