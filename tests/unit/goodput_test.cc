#include <catch2/catch.hpp>

#include "agent/goodput.h"

using mxrun::GoodputClock;
using std::chrono::seconds;

TEST_CASE("goodput: every second in one bucket, steps redone after a restart are lost work",
          "[goodput]") {
  const GoodputClock::Time t0{};
  GoodputClock clock(t0);
  clock.Joining(t0);
  clock.RoundStarted(t0 + seconds(1));  // 1 s rendezvous
  clock.Progress(t0 + seconds(3), 1);   // 2 s startup
  for (int step = 2; step <= 8; ++step) clock.Progress(t0 + seconds(2 + step), step);
  // 7 s training for steps 2..8: 1 s a step.
  clock.Failure(t0 + seconds(10));
  clock.Joining(t0 + seconds(12));       // 2 s restart (stopping the group)
  clock.RoundStarted(t0 + seconds(13));  // 1 s rendezvous
  clock.Progress(t0 + seconds(16), 6);   // resumed from step 5's checkpoint: 3 s restart,
                                         // steps 6..8 done again: 3 s lost
  clock.Progress(t0 + seconds(20), 10);  // 4 s training
  clock.Ended(t0 + seconds(20));
  const mxrun::GoodputReport r = clock.Report(t0 + seconds(25));
  CHECK(r.wall == 25);
  CHECK(r.rendezvous == 2);
  CHECK(r.startup == 2);
  CHECK(r.restart == 5);
  CHECK(r.steps_redone == 3);
  CHECK(r.lost_work == 3);
  CHECK(r.training == 8);
  CHECK(r.ratio() == Approx(8.0 / 25));
  CHECK(mxrun::FormatGoodput(r) ==
        "goodput 32.0%: 25.0 s wall, 8.0 s training, 2.0 s rendezvous, 2.0 s startup, 5.0 s "
        "restarts, 3.0 s lost work (3 steps redone)");
}

TEST_CASE(
    "goodput: the live report extrapolates the current bucket, and workers that never "
    "report are training from their round's start",
    "[goodput]") {
  const GoodputClock::Time t0{};
  GoodputClock clock(t0);
  clock.Joining(t0);
  CHECK_FALSE(clock.ran());
  clock.RoundStarted(t0 + seconds(2));
  CHECK(clock.ran());
  CHECK(clock.Report(t0 + seconds(5)).training == 3);
  clock.Failure(t0 + seconds(6));  // a node left
  clock.Joining(t0 + seconds(6));
  clock.RoundStarted(t0 + seconds(7));
  const mxrun::GoodputReport live = clock.Report(t0 + seconds(10));
  CHECK(live.rendezvous == 3);
  CHECK(live.training == 7);
  CHECK(live.startup == 0);
  CHECK(live.restart == 0);
  CHECK_FALSE(live.progress_reported);
  CHECK_THAT(mxrun::FormatGoodput(live),
             Catch::EndsWith("no progress reports: steps unknown, "
                             "a round's whole run counted as training"));
  // Once reports come, a round's wait for its first one is start-up, or restart after a failure.
  clock.Progress(t0 + seconds(12), 1);
  CHECK(clock.Report(t0 + seconds(12)).restart == 5);
}
