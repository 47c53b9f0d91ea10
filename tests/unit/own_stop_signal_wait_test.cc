#include "agent/own_stop_signal_wait.h"

#include <catch2/catch.hpp>

#include <signal.h>

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

}  // namespace
}  // namespace mxrun
