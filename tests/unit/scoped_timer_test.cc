// A ScopedTimer (agent/process/scoped_timer.h) cancels itself: armed again it replaces its timer,
// destroyed it leaves none behind, and it is disarmed before its callback runs, so the callback
// may arm it again. No sleeps: every deadline is already past, and RunOnce returns at once.

#include <catch2/catch.hpp>

#include <signal.h>

#include <chrono>
#include <memory>

#include "agent/process/event_loop.h"
#include "agent/process/scoped_timer.h"

namespace {

std::unique_ptr<mxrun::EventLoop> MakeLoop() {
  auto loop = mxrun::EventLoop::Create({SIGCHLD}, [](int) {});
  REQUIRE(loop.ok());
  return std::move(*loop);
}

// Runs the loop until nothing is due (bounded: a handful of turns, each returning at once).
void RunDue(mxrun::EventLoop& loop) {
  for (int turn = 0; turn < 4; ++turn) loop.RunOnce(mxrun::EventLoop::Deadline::clock::now());
}

}  // namespace

TEST_CASE("a scoped timer armed again runs only its last callback, once", "[timers]") {
  auto loop = MakeLoop();
  mxrun::ScopedTimer timer(*loop);
  const auto past = mxrun::EventLoop::Deadline::clock::now() - std::chrono::seconds(1);
  int first = 0, second = 0;
  timer.At(past, [&] { ++first; });
  CHECK(timer.armed());
  timer.At(past, [&] { ++second; });
  RunDue(*loop);
  CHECK(first == 0);
  CHECK(second == 1);
  CHECK_FALSE(timer.armed());
}

TEST_CASE("a scoped timer destroyed, or cancelled, leaves nothing to run", "[timers]") {
  auto loop = MakeLoop();
  const auto past = mxrun::EventLoop::Deadline::clock::now() - std::chrono::seconds(1);
  int ran = 0;
  {
    mxrun::ScopedTimer gone(*loop);
    gone.At(past, [&] { ++ran; });
  }
  mxrun::ScopedTimer cancelled(*loop);
  cancelled.Every(past, std::chrono::milliseconds(1), [&] { ++ran; });
  cancelled.Cancel();
  CHECK_FALSE(cancelled.armed());
  RunDue(*loop);
  CHECK(ran == 0);
}

TEST_CASE("a scoped timer's callback may arm it again", "[timers]") {
  auto loop = MakeLoop();
  mxrun::ScopedTimer timer(*loop);
  const auto past = mxrun::EventLoop::Deadline::clock::now() - std::chrono::seconds(1);
  int ran = 0;
  std::function<void()> again = [&] {
    if (++ran < 3) timer.At(past, again);
  };
  timer.At(past, again);
  RunDue(*loop);
  CHECK(ran == 3);
  CHECK_FALSE(timer.armed());
}
