#include <catch2/catch.hpp>

#include <cmath>

#include "agent/restart_clock.h"
#include "common/restart_phases.h"
#include "rendezvous/master_state/restart_timings.h"

namespace mxrun {
namespace {

using namespace std::chrono_literals;
using Time = RestartClock::Time;

TEST_CASE("a restart is timed phase by phase from the agent's events", "[restart_phases]") {
  std::vector<RestartPhases> told;
  RestartClock clock([&](const RestartPhases& p) { told.push_back(p); });
  const Time t0{};
  clock.RoundReady(t0, 0, false);  // the first round: no restart
  clock.RoundStarted(t0 + 1s);
  clock.Progress(t0 + 2s);
  CHECK(clock.count() == 0);

  clock.FailureSeen(t0 + 10s, "rank 1 failed: exit code 3");
  clock.WorkersStopped(t0 + 10s + 200ms);
  clock.FailureSeen(t0 + 10s + 300ms, "a worker failed");  // the rendezvous' word: same restart
  clock.RoundReady(t0 + 11s, 1, false);
  clock.RoundStarted(t0 + 11s + 50ms);
  CHECK(told.empty());  // done at the first step
  clock.Progress(t0 + 13s);
  clock.Progress(t0 + 14s);  // later steps change nothing
  REQUIRE(told.size() == 1);
  const RestartPhases& p = told[0];
  CHECK(p.round == 1);
  CHECK(p.cause == "rank 1 failed: exit code 3");
  CHECK_FALSE(p.in_process);
  CHECK(p.stop_s == Approx(0.2));
  CHECK(p.reform_s == Approx(0.8));
  CHECK(p.start_s == Approx(0.05));
  CHECK(p.first_step_s == Approx(1.95));
  CHECK(p.TotalSeconds() == Approx(3.0));
  CHECK(FormatRestartPhases(p, 1) ==
        "restart 1 (round 1; rank 1 failed: exit code 3): stop 0.200 s, re-form 0.800 s, "
        "start 0.050 s, first step 1.950 s; 3.000 s in all");
}

TEST_CASE("a restart whose workers never report says its first step is unknown",
          "[restart_phases]") {
  RestartClock clock;
  const Time t0{};
  clock.FailureSeen(t0, "peer");
  clock.WorkersStopped(t0 + 1s);
  clock.RoundReady(t0 + 2s, 1, false);
  clock.RoundStarted(t0 + 3s);
  // The next failure comes before any step: the first restart is done as it stands.
  clock.FailureSeen(t0 + 10s, "again");
  REQUIRE(clock.count() == 1);
  CHECK(clock.done()[0].first_step_s == -1);
  CHECK(FormatRestartPhases(clock.done()[0], 1) ==
        "restart 1 (round 1; peer): stop 1.000 s, re-form 1.000 s, start 1.000 s, first step "
        "unknown (no progress reports); 3.000 s to running");
  // That failure ended the job: no round formed, so it was no restart.
  clock.WorkersStopped(t0 + 11s);
  clock.Ended();
  CHECK(clock.count() == 1);
}

TEST_CASE("an in-process restart with nothing to stop, and the kept history is bounded",
          "[restart_phases]") {
  RestartClock clock;
  const Time t0{};
  clock.FailureSeen(t0, "node lost");  // this node's workers were not running: no stop event
  clock.RoundReady(t0 + 1s, 4, /*in_process=*/true);
  clock.RoundStarted(t0 + 1s);
  clock.Progress(t0 + 2s);
  REQUIRE(clock.count() == 1);
  CHECK(clock.done()[0].stop_s == -1);
  CHECK(clock.done()[0].reform_s == Approx(1.0));
  CHECK_THAT(FormatRestartPhases(clock.done()[0], 7),
             Catch::StartsWith("in-process restart 7 (round 4; node lost): stop unknown, "));
  for (int i = 0; i < 100; ++i) {
    const Time t = t0 + std::chrono::seconds(10 + i);
    clock.FailureSeen(t, "x");
    clock.RoundReady(t, 5 + i, false);
    clock.RoundStarted(t);
    clock.Progress(t);
  }
  CHECK(clock.count() == 101);
  CHECK(clock.done().size() == RestartClock::kKept);
  CHECK(clock.dropped() == 101 - static_cast<long long>(RestartClock::kKept));
  CHECK(clock.done().back().round == 104);
}

TEST_CASE("the master keeps each restart's slowest node per phase, and checks what it is sent",
          "[restart_phases]") {
  RestartTimings timings;
  RestartPhases a{1, "rank 3 failed: signal SIGKILL", false, 0.1, 2.0, 0.5, -1};
  RestartPhases b{1, "a worker failed", false, 0.3, 1.0, 0.2, 4.0};
  CHECK(timings.Add(a, 1) == "");
  CHECK(timings.Add(b, 1) == "");
  std::vector<RestartPhases> slowest = timings.Slowest();
  REQUIRE(slowest.size() == 1);
  CHECK(slowest[0].cause == a.cause);
  CHECK(slowest[0].nodes == 2);
  CHECK(slowest[0].stop_s == 0.3);
  CHECK(slowest[0].reform_s == 2.0);
  CHECK(slowest[0].start_s == 0.5);
  CHECK(slowest[0].first_step_s == 4.0);
  CHECK_THAT(FormatRestartPhases(slowest[0], 0),
             Catch::StartsWith("restart (round 1, slowest of 2 nodes; rank 3 failed"));

  RestartPhases bad = a;
  bad.stop_s = -5;
  CHECK_THAT(timings.Add(bad, 1), Catch::Contains("stop seconds -5"));
  bad = a;
  bad.first_step_s = std::nan("");
  CHECK_THAT(timings.Add(bad, 1), Catch::Contains("first_step seconds"));
  bad = a;
  bad.round = 9;
  CHECK(timings.Add(bad, 2) == "round 9 has not formed (the run is at round 2)");
  CHECK(timings.Slowest().size() == 1);  // nothing of those was kept

  for (int round = 2; round < 2 + static_cast<int>(RestartTimings::kKept); ++round) {
    RestartPhases p = a;
    p.round = round;
    CHECK(timings.Add(p, round) == "");
  }
  CHECK(timings.Slowest().size() == RestartTimings::kKept);
  CHECK(timings.Slowest().front().round == 2);
  CHECK_THAT(timings.Add(a, 100), Catch::Contains("older than the 50 kept"));
}

}  // namespace
}  // namespace mxrun
