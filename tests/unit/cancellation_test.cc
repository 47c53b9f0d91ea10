// Cancellation under a scheduler: the one-line summary of how each rank ended, and fitting the
// workers' grace inside Slurm's KillWait.
#include <catch2/catch.hpp>

#include <csignal>

#include "agent/cancel_summary.h"
#include "launcher/slurm_kill_wait.h"

using mxrun::FormatCancellation;
using mxrun::StoppedWorker;
using std::chrono::milliseconds;

TEST_CASE("the cancellation line says how each rank ended, ranks grouped", "[cancel]") {
  std::vector<StoppedWorker> workers = {
      {.global_rank = 3, .exit_code = -1, .term_signal = SIGKILL, .killed_after_grace = true},
      {.global_rank = 0, .exit_code = 0},
      {.global_rank = 1, .exit_code = 0},
      {.global_rank = 2, .exit_code = -1, .term_signal = SIGTERM},
      {.global_rank = 4, .exit_code = 0},
  };
  CHECK(FormatCancellation(SIGTERM, milliseconds(27000), workers, 143) ==
        "cancelled by SIGTERM: ranks 0-1,4 exited 0, rank 2 ended by SIGTERM, rank 3 SIGKILLed "
        "after the 27 s grace; exit code 143");
  CHECK(FormatCancellation(SIGINT, milliseconds(30000), {{.global_rank = 5, .exit_code = 130}},
                           130) == "cancelled by SIGINT: rank 5 exited 130; exit code 130");
  CHECK(FormatCancellation(SIGTERM, milliseconds(1500), {}, 143) ==
        "cancelled by SIGTERM, no worker running here; exit code 143");
  // Stopped to re-form before the signal came (a peer left first under scancel).
  CHECK(FormatCancellation(
            SIGTERM, milliseconds(1500),
            {{.global_rank = 1, .exit_code = 143}, {.global_rank = 0, .exit_code = 143}}, 143,
            /*stopped_before=*/true) ==
        "cancelled by SIGTERM: ranks 0-1 exited 143 (stopped before the signal, as the group "
        "re-formed); exit code 143");
  CHECK(FormatCancellation(SIGTERM, milliseconds(1500),
                           {{.global_rank = 0, .running = true, .exit_code = -1}}, 143) ==
        "cancelled by SIGTERM: rank 0 still running after SIGKILL (uninterruptible sleep?); exit "
        "code 143");
}

TEST_CASE("Slurm's KillWait is read from scontrol show config", "[cancel][slurm]") {
  const std::string config =
      "Configuration data as of 2026-11-25T03:10:00\n"
      "JobCompType             = jobcomp/none\n"
      "KillOnBadExit           = 0\n"
      "KillWait                = 12 sec\n"
      "LaunchParameters        = (null)\n";
  REQUIRE(mxrun::ParseKillWait(config) == milliseconds(12000));
  CHECK(mxrun::ParseKillWait("KillWait = 0 sec\n") == milliseconds(0));
  CHECK_FALSE(mxrun::ParseKillWait("KillOnBadExit = 0\n").has_value());
  CHECK_FALSE(mxrun::ParseKillWait("KillWait = soon\n").has_value());
  CHECK_FALSE(mxrun::ParseKillWait("KillWait = 3 min\n").has_value());
}

TEST_CASE("the grace ends inside KillWait with time to kill and report", "[cancel][slurm]") {
  CHECK(mxrun::GraceWithinKillWait(milliseconds(30000)) == milliseconds(27000));
  CHECK(mxrun::GraceWithinKillWait(milliseconds(6000)) == milliseconds(4000));
  CHECK(mxrun::GraceWithinKillWait(milliseconds(0)) == milliseconds(0));
}
