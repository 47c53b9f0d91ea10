// The fault catalogue's reading of a console and its comparison with a row
// (tests/faults/outcome.h), on recorded consoles.

#include <catch2/catch.hpp>

#include "tests/faults/catalogue.h"
#include "tests/faults/outcome.h"

using mxrun::faults::FinalState;
using mxrun::faults::kNotCounted;
using mxrun::faults::Mismatch;
using mxrun::faults::ReadConsole;
using mxrun::faults::Recovery;

namespace {

const char kRecovered[] =
    "mxrun: info: standby worker started (pid 12893)\n"
    "[n0 r0] train: rank 0: collective abandoned\n"
    "mxrun: warning: worker rank 1 (local_rank 1, pid 12873) failed: Signal 9 (SIGKILL); keeping\n"
    "mxrun: info: goodput 80.6%: 3.1 s wall\n"
    "mxrun: info: in-process restart 1 (round 1; rank 1 failed: Signal 9 (SIGKILL)): stop 0.000 "
    "s, re-form 0.000 s, start 0.001 s, first step 0.133 s; 0.134 s in all\n";

const char kFailed[] =
    "mxrun: info: restart 1 (round 1; rank 0 failed: exit code 1): stop 0.004 s, re-form 0.000 "
    "s, start 0.003 s, first step unknown (no progress reports); 0.007 s to running\n"
    "====================================================================\n"
    "mxrun: train FAILED (restarts spent: 1 of 1)\n"
    "--------------------------------------------------------------------\n"
    "Root cause (first observed failure):\n"
    "  rank       : 0 (local_rank: 0)\n"
    "  exit       : exit code 1\n"
    "  error_file : <N/A>\n"
    "  message    :\n"
    "      RuntimeError: boom\n"
    "      second line\n"
    "mxrun: warning: left out of the job's rounds during the job: n2 (2 worker failures)\n";

constexpr mxrun::faults::Fault kRow{99,
                                    "test-row",
                                    "a test row",
                                    "by hand",
                                    "none",
                                    {"rank 1 failed: Signal 9 (SIGKILL)", "standby worker started",
                                     0, 1, Recovery::kInProcess, "", 0, FinalState::kBitwise}};

}  // namespace

TEST_CASE("a console is read into causes, restarts, recovery, left-out lines and notices",
          "[unit][faults]") {
  auto recovered = ReadConsole(kRecovered);
  CHECK(recovered.causes == std::vector<std::string>{"rank 1 failed: Signal 9 (SIGKILL)"});
  CHECK(recovered.restarts == 1);
  CHECK(recovered.recovery == Recovery::kInProcess);
  CHECK(recovered.left_out.empty());
  CHECK(recovered.notices.size() == 3);  // not the worker's line, not the restart line

  auto failed = ReadConsole(kFailed);
  CHECK(failed.causes ==
        std::vector<std::string>{"rank 0 failed: exit code 1", "exit code 1 | RuntimeError: boom"});
  CHECK(failed.restarts == 1);
  CHECK(failed.recovery == Recovery::kJobEnds);
  CHECK(failed.left_out.size() == 1);
}

TEST_CASE("a row's mismatch names the row and every difference, and nothing when all match",
          "[unit][faults]") {
  auto outcome = ReadConsole(kRecovered);
  outcome.exit_code = 0;
  outcome.steps_lost = 0;
  outcome.same_state = true;
  CHECK(Mismatch(kRow, outcome) == "");

  outcome.exit_code = 1;
  outcome.steps_lost = 2;
  outcome.same_state = false;
  outcome.recovery = Recovery::kGroupRestart;
  const std::string wrong = Mismatch(kRow, outcome);
  CHECK_THAT(wrong, Catch::StartsWith("fault catalogue row 99 'test-row' (a test row; injected: "
                                      "by hand): "));
  CHECK_THAT(wrong, Catch::Contains("exit code: expected 0, observed 1"));
  CHECK_THAT(wrong, Catch::Contains("recovery: expected in-process restart, observed restart of "
                                    "the worker group"));
  CHECK_THAT(wrong, Catch::Contains("steps lost: expected at most 0, observed 2"));
  CHECK_THAT(wrong, Catch::Contains("final state: expected bitwise the fault-free run's, "
                                    "observed a different digest"));

  auto quiet = ReadConsole("mxrun: info: goodput 99%\n");
  quiet.exit_code = 0;
  quiet.steps_lost = kNotCounted;
  const std::string missing = Mismatch(kRow, quiet);
  CHECK_THAT(missing, Catch::Contains("cause: expected one containing 'rank 1 failed: Signal 9 "
                                      "(SIGKILL)', observed none"));
  CHECK_THAT(missing, Catch::Contains("notice: expected a warning containing 'standby worker "
                                      "started'"));
  CHECK_THAT(missing, Catch::Contains("steps lost: expected at most 0, observed none counted"));
}
