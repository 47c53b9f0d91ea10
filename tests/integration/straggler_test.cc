// Stragglers (issue 26) in real jobs: test_child's --slow-rank makes one rank report its steps 3x
// as slowly as the others. A one-node job judges on its agent; a multi-node job on the master,
// over every node's ranks, which tells the agent that runs the rank. Only the slow rank may be
// named, and nothing is touched unless --straggler_restart asks for it.

#include <signal.h>

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "tests/master.h"
#include "tests/metrics_client.h"
#include "tests/subprocess.h"

using mxrun::testing::AgentMetricsEndpoint;
using mxrun::testing::CountOccurrences;
using mxrun::testing::Curl;
using mxrun::testing::Master;
using mxrun::testing::ProcessResult;
using mxrun::testing::SamplesByLabel;
using mxrun::testing::Subprocess;
using namespace std::chrono_literals;

namespace {

// Two nodes of 2 workers each on `master`, reporting progress every 50 ms; rank 3 (node 1's
// second worker) is the slow one, 3x. The factor of 2 (not the default 1.5) keeps a rank that a
// busy 2-core machine starves for five steps in a row from being named in its place.
std::vector<std::unique_ptr<Subprocess>> SlowRankJob(const std::string& endpoint,
                                                     const std::string& run_id,
                                                     std::vector<std::string> extra = {}) {
  std::vector<std::string> flags{
      "--rdzv_backend=c10d", "--rdzv_endpoint=" + endpoint, "--rdzv_id=" + run_id,
      "--nnodes=2",          "--nproc_per_node=2",          "--rdzv_conf=is_host=0",
      "--metrics_port=0",    "--straggler_steps=5",         "--straggler_factor=2"};
  flags.insert(flags.end(), extra.begin(), extra.end());
  std::vector<std::unique_ptr<Subprocess>> agents;
  for (int i = 0; i < 2; ++i) {
    agents.push_back(std::make_unique<Subprocess>(mxrun::testing::MxrunWithChild(
        flags, {"--ready", "--sleep=90", "--progress=0.05", "--slow-rank=3"})));
  }
  return agents;
}

// `mxrun status --json` of the master's run `run_id`.
nlohmann::json RunStatus(const std::string& endpoint) {
  ProcessResult status =
      mxrun::testing::Run({MXRUN_BIN, "status", "--rdzv_endpoint=" + endpoint, "--json"}, {}, 20s);
  INFO(status.out << status.err);
  REQUIRE(status.exit_code == 0);
  const nlohmann::json reply = nlohmann::json::parse(status.out);
  REQUIRE(reply["runs"].size() == 1);
  return reply["runs"][0];
}

}  // namespace

TEST_CASE(
    "a straggler in a one-node job is named by its agent, and only it: a log line, the "
    "metric",
    "[metrics][straggler]") {
  Subprocess job(mxrun::testing::MxrunWithChild(
      {"--standalone", "--nproc_per_node=3", "--metrics_port=0", "--straggler_steps=5",
       "--straggler_factor=2"},  // as SlowRankJob's: rank 1 is 3x slower
      {"--ready", "--sleep=3", "--progress=0.05", "--slow-rank=1"}));
  const std::string endpoint = AgentMetricsEndpoint(job);
  REQUIRE(job.WaitForStderr("is a straggler", 1, 30s));
  const std::string page = Curl("http://" + endpoint + "/metrics");
  INFO(page);
  ProcessResult r = job.Wait(30s);
  INFO(r.err);
  CHECK(r.exit_code == 0);
  CHECK(CountOccurrences(r.err, "is a straggler") == 1);
  CHECK_THAT(r.err, Catch::Contains("rank 1 is a straggler: "));
  CHECK_THAT(r.err, Catch::Contains("the other ranks' median"));
  CHECK(SamplesByLabel(page, "mxrun_worker_straggler", "rank") ==
        std::map<std::string, std::string>{{"0", "0"}, {"1", "1"}, {"2", "0"}});
  CHECK(CountOccurrences(page, "mxrun_agent_stragglers_total{") == 1);
}

TEST_CASE(
    "a straggler in a two-node job is named by the master over every rank, told to the "
    "agent that runs it, marked in mxrun status and the metrics, and the job goes on",
    "[metrics][straggler]") {
  Master master;
  auto agents = SlowRankJob(master.endpoint(), "strag2");
  for (auto& agent : agents) REQUIRE(agent->WaitForStdout("world=4", 2, 60s));
  REQUIRE(master.process().WaitForStderr("is a straggler", 1, 60s));
  // The agent that runs rank 3 says so; the other says nothing of stragglers.
  Subprocess* slow = nullptr;
  Subprocess* other = nullptr;
  for (auto& agent : agents) {
    (agent->out().find("ready rank=3 ") != std::string::npos ? slow : other) = agent.get();
  }
  REQUIRE(slow != nullptr);
  REQUIRE(other != nullptr);
  REQUIRE(slow->WaitForStderr("rank 3 is a straggler: ", 1, 20s));

  const nlohmann::json run = RunStatus(master.endpoint());
  INFO(run.dump(1));
  CHECK(run["stragglers"].size() == 1);
  CHECK(run["stragglers"][0]["rank"] == 3);
  std::map<int, double> rates;
  for (const nlohmann::json& member : run["members"]) {
    for (const nlohmann::json& rank : member["ranks"]) {
      CHECK(rank["step"].get<long long>() > 0);
      CHECK(rank["straggler"] == (rank["rank"] == 3));
      CHECK(rank["last_report_s_ago"].get<double>() < 10);
      if (rank["steps_per_second"].is_number()) {
        rates[rank["rank"].get<int>()] = rank["steps_per_second"].get<double>();
      }
    }
  }
  REQUIRE(rates.size() == 4);
  CHECK(rates[3] * 2 < rates[0]);  // 3x slower, with room for scheduling noise
  ProcessResult text =
      mxrun::testing::Run({MXRUN_BIN, "status", "--rdzv_endpoint=" + master.endpoint()}, {}, 20s);
  CHECK(CountOccurrences(text.out, "STRAGGLER") == 1);

  const std::string master_page = Curl("http://" + master.MetricsEndpoint() + "/metrics");
  INFO(master_page);
  CHECK(SamplesByLabel(master_page, "mxrun_rank_straggler", "rank") ==
        std::map<std::string, std::string>{{"0", "0"}, {"1", "0"}, {"2", "0"}, {"3", "1"}});
  const std::string slow_page = Curl("http://" + AgentMetricsEndpoint(*slow) + "/metrics");
  CHECK(SamplesByLabel(slow_page, "mxrun_worker_straggler", "rank") ==
        std::map<std::string, std::string>{{"2", "0"}, {"3", "1"}});

  for (auto& agent : agents) kill(agent->pid(), SIGTERM);
  for (auto& agent : agents) CHECK(agent->Wait(30s).exit_code == 143);  // never restarted
  CHECK(CountOccurrences(other->err(), "straggler") == 0);
  CHECK(CountOccurrences(slow->err(), "is a straggler") == 1);
  CHECK(CountOccurrences(slow->out(), "attempt=1") == 0);
  const std::string said = master.StopAndOutput();
  CHECK(CountOccurrences(said, "is a straggler") == 1);
  CHECK_THAT(said, Catch::Contains("run 'strag2': rank 3 is a straggler: "));
}

TEST_CASE(
    "straggler restart (--straggler_restart): a straggler fails the group, counted as such, until "
    "the budget "
    "is spent",
    "[metrics][straggler]") {
  Master master;
  auto agents =
      SlowRankJob(master.endpoint(), "strag3", {"--straggler_restart", "--max_restarts=1"});
  std::vector<ProcessResult> results;
  for (auto& agent : agents) results.push_back(agent->Wait(120s));
  for (const ProcessResult& r : results) {
    INFO(r.out << r.err);
    CHECK(r.exit_code == 1);
    CHECK_THAT(r.err, Catch::Contains("restarting the worker group (1 of 1 restarts): worker "
                                      "rank 3 on "));
    CHECK_THAT(r.err, Catch::Contains("stopped as a straggler (--straggler_restart): rank 3 is "
                                      "a straggler"));
  }
  // The summary (printed by both nodes) has no hang diagnostics: a straggler is slow, not stuck.
  for (const ProcessResult& r : results) {
    CHECK_THAT(r.err, Catch::Contains("  exit       : stopped as a straggler"));
    CHECK_THAT(r.err, !Catch::Contains("diagnostics:"));
  }
  const nlohmann::json run = RunStatus(master.endpoint());
  INFO(run.dump(1));
  CHECK(run["phase"] == "failed");
  CHECK(run["failures"]["straggler"] == 2);
  CHECK(run["failures"].size() == 1);
}

TEST_CASE("a straggler restart without judging stragglers is refused", "[metrics][straggler]") {
  ProcessResult r = mxrun::testing::Run(
      mxrun::testing::MxrunWithChild(
          {"--standalone", "--nproc_per_node=1", "--straggler_restart", "--straggler_steps=0"},
          {"--ready"}),
      {}, 20s);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Catch::Contains("--straggler_restart needs stragglers to be judged: "
                                    "--straggler_steps must be above 0"));
}
