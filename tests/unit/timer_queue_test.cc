// The event loop's timers (agent/process/timer_queue.h), on a clock the test moves: order, repeats,
// missed turns, cancelling from a callback. No waiting.

#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "agent/process/timer_queue.h"

using namespace std::chrono_literals;
using mxrun::TimerQueue;

TEST_CASE("timers run in the order they are due, once each, when their time has come", "[timers]") {
  TimerQueue timers;
  const TimerQueue::Time t0{};
  std::vector<std::string> ran;
  timers.At(t0 + 30ms, [&] { ran.push_back("c"); });
  timers.At(t0 + 10ms, [&] { ran.push_back("a"); });
  timers.At(t0 + 20ms, [&] { ran.push_back("b"); });
  CHECK(timers.Next() == t0 + 10ms);
  CHECK(timers.RunDue(t0 + 5ms) == 0);
  CHECK(timers.RunDue(t0 + 20ms) == 2);
  CHECK(ran == std::vector<std::string>{"a", "b"});
  CHECK(timers.Next() == t0 + 30ms);
  CHECK(timers.RunDue(t0 + 100ms) == 1);
  CHECK(ran.back() == "c");
  CHECK_FALSE(timers.Next().has_value());
}

TEST_CASE("a repeating timer keeps its period, and turns missed altogether run once", "[timers]") {
  TimerQueue timers;
  const TimerQueue::Time t0{};
  int turns = 0;
  timers.Every(t0 + 100ms, 100ms, [&] { ++turns; });
  CHECK(timers.RunDue(t0 + 130ms) == 1);  // late: the next is still due at 200 ms
  CHECK(timers.Next() == t0 + 200ms);
  CHECK(timers.RunDue(t0 + 750ms) == 1);  // five turns missed: one run, then 800 ms
  CHECK(turns == 2);
  CHECK(timers.Next() == t0 + 800ms);
}

TEST_CASE("a timer cancelled, also by another timer's callback, does not run", "[timers]") {
  TimerQueue timers;
  const TimerQueue::Time t0{};
  int ran = 0;
  const TimerQueue::Id second = timers.At(t0 + 20ms, [&] { ++ran; });
  timers.At(t0 + 10ms, [&] { timers.Cancel(second); });
  const TimerQueue::Id repeating = timers.Every(t0 + 5ms, 5ms, [&] { ++ran; });
  timers.Cancel(repeating);
  timers.Cancel(12345);                  // unknown: ignored
  CHECK(timers.RunDue(t0 + 50ms) == 1);  // only the one that cancelled the other
  CHECK(ran == 0);
  CHECK_FALSE(timers.Next().has_value());
}

TEST_CASE("a timer added by a callback runs on a later turn", "[timers]") {
  TimerQueue timers;
  const TimerQueue::Time t0{};
  int ran = 0;
  timers.At(t0 + 10ms, [&] { timers.At(t0, [&] { ++ran; }); });
  CHECK(timers.RunDue(t0 + 10ms) == 1);
  CHECK(ran == 0);
  CHECK(timers.RunDue(t0 + 10ms) == 1);
  CHECK(ran == 1);
}
