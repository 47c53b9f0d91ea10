#include "agent/rank_progress_book.h"

#include <catch2/catch.hpp>

namespace mxrun {
namespace {

using namespace std::chrono_literals;

WorkerControlMessage Step(long long step) {
  WorkerControlMessage report;
  report.step = step;
  return report;
}

TEST_CASE("a progress report without its step time gets the time since the rank's last",
          "[progress_book]") {
  RankProgressBook book;
  const RankProgressBook::Time t0{};
  CHECK(book.Record(0, 4, Step(10), t0).step_seconds < 0);  // the first: unknown
  CHECK(book.Record(0, 4, Step(14), t0 + 2s).step_seconds == Approx(0.5));
  CHECK(book.Record(0, 4, Step(14), t0 + 3s).step_seconds < 0);  // no new step
  WorkerControlMessage given = Step(15);
  given.step_seconds = 0.25;
  CHECK(book.Record(1, 5, given, t0 + 3s).step_seconds == 0.25);  // given: kept
  const std::vector<RankProgress> latest = book.Latest();
  REQUIRE(latest.size() == 2);
  CHECK(latest[0].global_rank == 4);
  CHECK(latest[0].step == 14);
  CHECK(latest[1].local_rank == 1);
  book.Clear();
  CHECK(book.Latest().empty());
}

TEST_CASE("reports read in one burst are timed against the rank's report before the burst",
          "[progress_book]") {
  // A rank steps every 50 ms; its agent, kept from the CPU, reads steps 2 to 4 at once at 200 ms.
  RankProgressBook book;
  const RankProgressBook::Time t0{};
  book.Record(0, 3, Step(0), t0);
  CHECK(book.Record(0, 3, Step(1), t0 + 50ms).step_seconds == Approx(0.05));
  CHECK(book.Record(0, 3, Step(2), t0 + 200ms).step_seconds == Approx(0.15));
  CHECK(book.Record(0, 3, Step(3), t0 + 200ms + 5us).step_seconds == Approx(0.075).epsilon(1e-3));
  CHECK(book.Record(0, 3, Step(4), t0 + 200ms + 9us).step_seconds == Approx(0.05).epsilon(1e-3));
  // What is handed on is the last of the burst: the rank's true step time, not ~0.
  CHECK(book.Latest()[0].step_seconds == Approx(0.05).epsilon(1e-3));
  // The next report on time is timed against the burst's last.
  CHECK(book.Record(0, 3, Step(5), t0 + 250ms).step_seconds == Approx(0.05).epsilon(1e-3));
}

TEST_CASE("a burst with nothing earlier to time against leaves the step time unknown",
          "[progress_book]") {
  RankProgressBook book;
  const RankProgressBook::Time t0{};
  CHECK(book.Record(0, 1, Step(1), t0).step_seconds < 0);
  CHECK(book.Record(0, 1, Step(2), t0 + 1us).step_seconds < 0);
  CHECK(book.Record(0, 1, Step(3), t0 + 2us).step_seconds < 0);
  CHECK(book.Record(0, 1, Step(4), t0 + 40ms).step_seconds == Approx(0.04).epsilon(1e-3));
  // A new round forgets what came before: its first report is unknown again.
  book.Clear();
  CHECK(book.Record(0, 1, Step(5), t0 + 1s).step_seconds < 0);
}

TEST_CASE("a rank that reports without pause is timed over the last kMinSpan, with bounded memory",
          "[progress_book]") {
  RankProgressBook book;
  const RankProgressBook::Time t0{};
  // A step every millisecond for a second: each timed against the report 10 ms before it.
  double last = -1;
  for (int step = 0; step <= 1000; ++step) {
    last = book.Record(0, 0, Step(step), t0 + step * 1ms).step_seconds;
  }
  CHECK(last == Approx(0.001));
  // Then a thousand reports in one microsecond: timed against the last one on the millisecond
  // clock, whatever was dropped to keep within kMaxKept.
  for (int i = 1; i <= 1000; ++i) {
    last = book.Record(0, 0, Step(1000 + i), t0 + 1s + i * 1ns).step_seconds;
  }
  CHECK(last > 0);
  CHECK(last < 0.001);
}

}  // namespace
}  // namespace mxrun
