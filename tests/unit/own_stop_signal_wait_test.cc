#include "agent/own_stop_signal_wait.h"

#include <catch2/catch.hpp>

#include <signal.h>

#include "agent/rank_progress_book.h"

namespace mxrun {
namespace {

using namespace std::chrono_literals;
using Verdict = OwnStopSignalWait::Verdict;

WorkerFailure EndedBy(int term_signal, int exit_code = 0) {
  WorkerFailure f;
  f.term_signal = term_signal;
  f.exit_code = exit_code;
  return f;
}

TEST_CASE("a worker ended by a stop signal waits for mxrun's own, then is judged",
          "[own_stop_signal]") {
  const OwnStopSignalWait::Time t0{};
  OwnStopSignalWait wait(1000ms);
  CHECK(wait.Check(t0, EndedBy(SIGTERM), false) == Verdict::kBegin);
  CHECK(wait.deadline() == t0 + 1000ms);
  CHECK(wait.Check(t0 + 999ms, EndedBy(SIGTERM), false) == Verdict::kWait);
  CHECK(wait.Check(t0 + 500ms, EndedBy(SIGTERM), true) == Verdict::kWait);  // it came
  CHECK(wait.Check(t0 + 1000ms, EndedBy(SIGTERM), false) == Verdict::kJudge);
  wait.Reset();
  CHECK(wait.Check(t0 + 5s, EndedBy(0, 143), false) == Verdict::kBegin);  // exit 128+SIGTERM
  wait.Reset();
  CHECK(wait.Check(t0, EndedBy(SIGINT), false) == Verdict::kBegin);
  // Anything else is judged at once: SIGKILL, SIGSEGV, an exit code.
  OwnStopSignalWait other(1000ms);
  CHECK(other.Check(t0, EndedBy(SIGKILL), false) == Verdict::kJudge);
  CHECK(other.Check(t0, EndedBy(SIGSEGV), false) == Verdict::kJudge);
  CHECK(other.Check(t0, EndedBy(0, 1), false) == Verdict::kJudge);
  // Off (no Slurm, no systemd): judged at once.
  OwnStopSignalWait off(0ms);
  CHECK(off.Check(t0, EndedBy(SIGTERM), false) == Verdict::kJudge);
}

TEST_CASE("a progress report without its step time gets the time since the rank's last",
          "[own_stop_signal]") {
  RankProgressBook book;
  const RankProgressBook::Time t0{};
  WorkerControlMessage report;
  report.step = 10;
  CHECK(book.Record(0, 4, report, t0).step_seconds < 0);  // the first: unknown
  report.step = 14;
  CHECK(book.Record(0, 4, report, t0 + 2s).step_seconds == Approx(0.5));
  report.step = 14;
  CHECK(book.Record(0, 4, report, t0 + 3s).step_seconds < 0);  // no new step
  report.step_seconds = 0.25;
  report.step = 15;
  CHECK(book.Record(1, 5, report, t0 + 3s).step_seconds == 0.25);  // given: kept
  const std::vector<RankProgress> latest = book.Latest();
  REQUIRE(latest.size() == 2);
  CHECK(latest[0].global_rank == 4);
  CHECK(latest[0].step == 14);
  CHECK(latest[1].local_rank == 1);
  book.Clear();
  CHECK(book.Latest().empty());
}

}  // namespace
}  // namespace mxrun
