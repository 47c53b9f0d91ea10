// --prestart: an ordinary Python script (no mxrun module) restarted in interpreters the agent
// started ahead with torch imported (python/mxrun/_prestart.py). Real mxrun, real PyTorch (the
// project's venv), Gloo on the CPU.

#include <catch2/catch.hpp>

#include <signal.h>

#include <map>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "tests/python_workers.h"
#include "tests/subprocess.h"

using namespace std::chrono_literals;
using mxrun::testing::Describe;
using mxrun::testing::ProcessResult;
using mxrun::testing::PythonWorkerEnv;
using mxrun::testing::Run;
using mxrun::testing::Subprocess;
using nlohmann::json;

namespace {

const std::string kWorker = std::string(PYTHON_TESTS_DIR) + "/prestart_worker.py";

// The JSON records the workers printed (behind mxrun's "[n0 rR] " prefix).
std::vector<json> Records(const std::string& out) {
  std::vector<json> records;
  std::regex line("\\] (\\{\"event\".*\\})");
  for (auto it = std::sregex_iterator(out.begin(), out.end(), line); it != std::sregex_iterator();
       ++it) {
    records.push_back(json::parse((*it)[1].str()));
  }
  return records;
}

// Once both ranks have summed and both pre-started interpreters are ready (a few seconds after
// the round began), SIGKILLs rank 1 and waits for the job's end.
ProcessResult KillRankOneOnceReady(Subprocess& job) {
  REQUIRE(job.WaitForStdout("\"event\": \"sum\"", 2, 120s));
  REQUIRE(job.WaitForStderr("ready to take a rank in-process", 2, 120s));
  int victim = -1;
  for (const json& r : Records(job.out())) {
    if (r["event"] == "start" && r["rank"] == 1) victim = r["pid"];
  }
  REQUIRE(victim > 0);
  REQUIRE(::kill(victim, SIGKILL) == 0);
  return job.Wait(120s);
}

}  // namespace

TEST_CASE(
    "mxrun --prestart: after a SIGKILL the restarted ranks run the script in the pre-started "
    "interpreters, torch already imported, as `python script.py` would",
    "[integration][prestart]") {
  Subprocess job({MXRUN_BIN, "--standalone", "--nproc_per_node=2", "--max_restarts=1", "--prestart",
                  kWorker, "--an", "arg"},
                 PythonWorkerEnv());
  ProcessResult result = KillRankOneOnceReady(job);
  INFO(Describe(result));
  REQUIRE(result.exit_code == 0);
  CHECK_THAT(result.err, Catch::Contains("stopping the workers; the pre-started interpreters "
                                         "take the ranks"));
  std::smatch m;
  REQUIRE(std::regex_search(
      result.err, m,
      std::regex(
          "started rank\\(s\\) 0 \\(standby pid ([0-9]+)\\), 1 \\(standby pid ([0-9]+)\\)")));
  const std::set<int> standbys = {std::stoi(m[1]), std::stoi(m[2])};
  int starts[2] = {0, 0};
  for (const json& r : Records(result.out)) {
    INFO(r.dump());
    const int attempt = r["attempt"];
    if (r["event"] == "sum") {
      CHECK(r["sum"] == 3.0);  // 1 + 2: both ranks in one group, each round
      continue;
    }
    ++starts[attempt];
    CHECK(r["preloaded"] == (attempt == 1));
    CHECK(r["dynamo_preloaded"] == (attempt == 1));  // DDP's first import, done ahead too
    CHECK(r["rank_at_import"] == std::to_string(r["rank"].get<int>()));
    CHECK(r["name"] == "__main__");
    CHECK(r["argv"] == json::array({kWorker, "--an", "arg"}));
    CHECK(r["path0"] == PYTHON_TESTS_DIR);
    CHECK(r["standby"].is_null());  // MXRUN_STANDBY is gone once it has a rank
    if (attempt == 1) CHECK(standbys.count(r["pid"].get<int>()) == 1);
  }
  CHECK(starts[0] == 2);
  CHECK(starts[1] == 2);
}

TEST_CASE(
    "mxrun --prestart: a module imported ahead that reads RANK at import is named at once, and the "
    "restarted ranks start afresh rather than keep the standby's nothing",
    "[integration][prestart]") {
  std::map<std::string, std::string> env = PythonWorkerEnv();
  env["PYTHONPATH"] += std::string(":") + PYTHON_TESTS_DIR;  // where keeps_rank_at_import lies
  env["MXRUN_PRESTART_IMPORTS"] = "keeps_rank_at_import";
  Subprocess job(
      {MXRUN_BIN, "--standalone", "--nproc_per_node=2", "--max_restarts=1", "--prestart", kWorker},
      env);
  ProcessResult result = KillRankOneOnceReady(job);
  INFO(Describe(result));
  REQUIRE(result.exit_code == 0);
  // Said as soon as the interpreters were ready, before any restart.
  CHECK_THAT(result.err, Catch::Contains("imported ahead, RANK (by keeps_rank_at_import) read "
                                         "what only a rank's round sets"));
  CHECK_THAT(result.err, Catch::Contains("RANK (by keeps_rank_at_import) was read while imported "
                                         "ahead: starting a fresh interpreter"));
  int restarted = 0;
  for (const json& r : Records(result.out)) {
    if (r["event"] != "start" || r["attempt"] != 1) continue;
    INFO(r.dump());
    ++restarted;
    CHECK(r["preloaded"] == false);  // a fresh interpreter, with the round's environment
    CHECK(r["rank_at_import"] == std::to_string(r["rank"].get<int>()));
  }
  CHECK(restarted == 2);
}

TEST_CASE("mxrun --prestart is refused where it cannot work, with what is accepted",
          "[integration][prestart]") {
  ProcessResult not_python = Run(
      {MXRUN_BIN, "--standalone", "--nproc_per_node=1", "--prestart", "--no_python", "/bin/true"},
      {}, 30s);
  INFO(Describe(not_python));
  CHECK(not_python.exit_code == 2);
  CHECK_THAT(not_python.err, Catch::Contains("--prestart") &&
                                 Catch::Contains("a Python script or -m module as the entrypoint"));
  ProcessResult with_standbys = Run({MXRUN_BIN, "--standalone", "--nproc_per_node=1", "--prestart",
                                     "--standby_workers=1", kWorker},
                                    PythonWorkerEnv(), 30s);
  INFO(Describe(with_standbys));
  CHECK(with_standbys.exit_code == 2);
  CHECK_THAT(with_standbys.err, Catch::Contains("one per local rank"));
  // The workers' Python cannot import the mxrun module: said at launch, nothing started.
  std::map<std::string, std::string> env = PythonWorkerEnv();
  env["PYTHONPATH"] = "/nonexistent";
  ProcessResult no_module =
      Run({MXRUN_BIN, "--standalone", "--nproc_per_node=1", "--prestart", kWorker}, env, 30s);
  INFO(Describe(no_module));
  CHECK(no_module.exit_code == 2);
  CHECK_THAT(no_module.err, Catch::Contains("cannot import mxrun._prestart: install mxrun"));
  CHECK_THAT(no_module.out + no_module.err, !Catch::Contains("\"event\": \"start\""));
}
