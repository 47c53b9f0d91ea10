// Repeat offenders kept out (issue 27, item 2) in a real job: three agents on a real master, the
// third node's worker failing on every attempt. After --exclude_after failures the master leaves it
// out while the other two meet --nnodes' minimum; the job goes on at two nodes with restarts to
// spare, the excluded agent keeps waiting, and everybody's summary names it.

#include <signal.h>
#include <unistd.h>

#include <memory>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "tests/master.h"
#include "tests/subprocess.h"

using mxrun::testing::CountOccurrences;
using mxrun::testing::Master;
using mxrun::testing::ProcessResult;
using mxrun::testing::Subprocess;
using namespace std::chrono_literals;

namespace {

std::unique_ptr<Subprocess> Agent(const Master& master, std::vector<std::string> child,
                                  std::vector<std::string> extra = {}) {
  std::vector<std::string> flags{"--rdzv_backend=c10d",
                                 "--rdzv_endpoint=" + master.endpoint(),
                                 "--rdzv_id=offender",
                                 "--nnodes=2:3",
                                 "--nproc_per_node=1",
                                 "--max_restarts=3",
                                 "--rdzv_conf=is_host=0,last_call_timeout=1",
                                 "--exclude_backoff=120"};
  flags.insert(flags.end(), extra.begin(), extra.end());
  return std::make_unique<Subprocess>(mxrun::testing::MxrunWithChild(flags, child));
}

}  // namespace

TEST_CASE(
    "a node failing again and again is left out: the job goes on at two nodes with "
    "restarts to spare",
    "[exclusion]") {
  Master master;
  std::vector<std::unique_ptr<Subprocess>> agents;
  agents.push_back(Agent(master, {"--ready", "--sleep-if-world=2", "--sleep=6"}));
  agents.push_back(Agent(master, {"--ready", "--sleep-if-world=2", "--sleep=6"}));
  // The bad node: its worker fails at once, every attempt.
  agents.push_back(Agent(master, {"--ready", "--exit=3"}));
  Subprocess& bad = *agents[2];
  REQUIRE(
      bad.WaitForStderr("the master leaves this node out of the job's rounds: 2 worker "
                        "failures within 3600 s: left out for 120 s",
                        1, 60s));
  // While it is left out, mxrun status says so, and why.
  bool shown = false;
  std::string status_out;
  for (int i = 0; i < 50 && !shown; ++i) {
    ProcessResult status =
        mxrun::testing::Run({MXRUN_BIN, "status", "--rdzv_endpoint=" + master.endpoint()}, {}, 20s);
    status_out = status.out;
    shown = status.out.find("excluded") != std::string::npos &&
            status.out.find("excluded: 2 worker failures within 3600 s") != std::string::npos;
    if (!shown) usleep(100'000);
  }
  INFO(status_out);
  CHECK(shown);
  for (int i = 0; i < 2; ++i) {
    ProcessResult r = agents[i]->Wait(60s);
    INFO(r.out << r.err);
    CHECK(r.exit_code == 0);
    CHECK_THAT(r.out, Catch::Contains("world=2 attempt=2"));  // the third attempt, at two nodes
    CHECK_THAT(r.err, Catch::Contains("left out of the job's rounds during the job: "));
    CHECK_THAT(r.err, Catch::Contains("(exclusion 1; --exclude_after=2)"));
  }
  // The left-out agent waited for the whole job, and hears it succeeded.
  ProcessResult left = bad.Wait(30s);
  INFO(left.out << left.err);
  CHECK(left.exit_code == 0);
  CHECK(CountOccurrences(left.out, "ready rank=") == 2);  // it ran the two failing attempts only
  const std::string said = master.StopAndOutput();
  CHECK_THAT(said, Catch::Contains("run 'offender': leaving "));
  CHECK_THAT(said, Catch::Contains(" out of the next rounds: 2 worker failures within 3600 s"));
}

TEST_CASE("with --exclude_after=0 no node is left out, and bad values are refused", "[exclusion]") {
  Master master;
  std::vector<std::unique_ptr<Subprocess>> agents;
  for (int i = 0; i < 2; ++i) {
    agents.push_back(Agent(master, {"--ready", "--sleep=30"}, {"--exclude_after=0"}));
  }
  agents.push_back(Agent(master, {"--ready", "--exit=3"}, {"--exclude_after=0"}));
  // Every restart is spent on the bad node: 4 attempts, then the job fails.
  for (auto& agent : agents) {
    ProcessResult r = agent->Wait(90s);
    INFO(r.out << r.err);
    CHECK(r.exit_code != 0);
    CHECK_THAT(r.err, !Catch::Contains("left out"));
  }
  ProcessResult bad = mxrun::testing::Run(
      mxrun::testing::MxrunWithChild({"--standalone", "--exclude_backoff=0"}, {}), {}, 20s);
  CHECK(bad.exit_code == 2);
  CHECK_THAT(bad.err, Catch::Contains("accepted: a window above 0 s and a back-off above 0 s"));
}
