// Every restart, phase by phase, at the end of the job (issue 37): real mxrun processes and the
// test_child program, with and without progress reports. The master's side (mxrun status, its
// page) and the metrics are in metrics_test.cc; an in-process restart's in
// in_process_restart_test.cc.

#include <catch2/catch.hpp>

#include <chrono>
#include <regex>
#include <string>
#include <vector>

#include "tests/subprocess.h"

using mxrun::testing::ProcessResult;
using mxrun::testing::Run;
using namespace std::chrono_literals;

namespace {

// The seconds of each phase in the summary's restart line number `number` (empty: none found).
std::vector<double> PhasesOf(const std::string& err, int number) {
  const std::regex line("restart " + std::to_string(number) +
                        R"( \(round \d+; [^)]*\): stop ([0-9.]+) s, re-form ([0-9.]+) s, )"
                        R"(start ([0-9.]+) s, first step ([0-9.]+) s; ([0-9.]+) s in all)");
  std::smatch m;
  if (!std::regex_search(err, m, line)) return {};
  std::vector<double> phases;
  for (size_t i = 1; i < m.size(); ++i) phases.push_back(std::stod(m[i].str()));
  return phases;
}

}  // namespace

TEST_CASE("the summary times every restart phase by phase, the first step from progress reports",
          "[integration][restart_phases]") {
  // Rank 1 fails in the first attempt; every worker that runs sends progress reports.
  ProcessResult r = Run(
      mxrun::testing::MxrunWithChild(
          {"--standalone", "--nproc_per_node=2", "--max_restarts=1"},
          {"--sleep=1", "--progress=0.1", "--exit=3", "--only-rank=1", "--fail-below-attempt=1"}),
      {}, 60s);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.err, Catch::Contains("restart 1 (round 1; rank 1 failed: exit code 3)"));
  const std::vector<double> phases = PhasesOf(r.err, 1);
  REQUIRE(phases.size() == 5);
  // Rank 0 was stopped (SIGTERM: it ends at once), the new round's workers spawned, and their
  // reports came every 0.1 s: each phase timed, the last the sum of the others.
  for (double s : phases) CHECK(s >= 0);
  CHECK(phases[4] == Approx(phases[0] + phases[1] + phases[2] + phases[3]).margin(0.02));
  CHECK_THAT(r.err, !Catch::Contains("restart 2"));
}

TEST_CASE("restarts whose workers send no progress say their first step is unknown",
          "[integration][restart_phases]") {
  ProcessResult r = Run(mxrun::testing::MxrunWithChild(
                            {"--standalone", "--nproc_per_node=2", "--max_restarts=2"},
                            {"--sleep=0.5", "--exit=3", "--only-rank=1", "--fail-below-attempt=2"}),
                        {}, 60s);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  for (int number : {1, 2}) {
    INFO("restart " << number);
    const std::string n = std::to_string(number);
    CHECK(std::regex_search(
        r.err, std::regex("restart " + n + " \\(round " + n +
                          R"(; rank 1 failed: exit code 3\): stop [0-9.]+ s, re-form [0-9.]+ s, )"
                          R"(start [0-9.]+ s, first step unknown \(no progress reports\); )"
                          R"([0-9.]+ s to running)")));
  }
  CHECK(PhasesOf(r.err, 1).empty());
}

TEST_CASE("a job whose last failure spends the budget prints no restart it did not make",
          "[integration][restart_phases]") {
  ProcessResult r =
      Run(mxrun::testing::MxrunWithChild({"--standalone", "--nproc_per_node=2", "--max_restarts=1"},
                                         {"--sleep=0.5", "--exit=3", "--only-rank=1"}),
          {}, 60s);
  INFO(r.err);
  CHECK(r.exit_code == 93);  // both attempts failed the same way (--do_not_requeue_exit_code)
  CHECK_THAT(r.err, Catch::Contains("restart 1 (round 1; rank 1 failed: exit code 3)"));
  CHECK_THAT(r.err, !Catch::Contains("restart 2"));
}
