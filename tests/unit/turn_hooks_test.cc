// The hooks that run after each turn of the agent's loop (agent/process/turn_hooks.h): in the
// order they were added, taken out by their handles (also by an earlier hook of the same turn), and
// run only by EndTurn, never by a nested RunOnce. No waiting: RunOnce is given a deadline now.

#include <catch2/catch.hpp>

#include <signal.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "agent/process/event_loop.h"
#include "agent/process/turn_hooks.h"

using mxrun::EventLoop;
using mxrun::TurnHooks;

TEST_CASE("turn hooks run in the order they were added, every turn, until their handles go",
          "[turn_hooks]") {
  TurnHooks hooks;
  std::vector<std::string> ran;
  TurnHooks::Hook a = hooks.Add([&] { ran.push_back("a"); });
  std::optional<TurnHooks::Hook> b = hooks.Add([&] { ran.push_back("b"); });
  TurnHooks::Hook c = hooks.Add([&] { ran.push_back("c"); });
  hooks.RunAll();
  CHECK(ran == std::vector<std::string>{"a", "b", "c"});
  b.reset();
  hooks.RunAll();
  CHECK(ran == std::vector<std::string>{"a", "b", "c", "a", "c"});
  CHECK(hooks.size() == 2);
  // A moved handle holds the hook; the moved-from one holds nothing.
  TurnHooks::Hook moved = std::move(a);
  a = TurnHooks::Hook();
  CHECK(hooks.size() == 2);
  moved.Remove();
  c = TurnHooks::Hook();
  CHECK(hooks.size() == 0);
  hooks.RunAll();
  CHECK(ran.size() == 5);
}

TEST_CASE("a hook that takes out a later one (its owner destroyed) keeps it from this turn",
          "[turn_hooks]") {
  TurnHooks hooks;
  std::vector<std::string> ran;
  std::unique_ptr<TurnHooks::Hook> group;  // as the worker group's, which CheckGroup may destroy
  TurnHooks::Hook later;                   // added by a hook during a turn
  TurnHooks::Hook check = hooks.Add([&] {
    ran.push_back("check");
    group.reset();
    if (ran.size() == 1) later = hooks.Add([&] { ran.push_back("later"); });
  });
  group = std::make_unique<TurnHooks::Hook>(hooks.Add([&] { ran.push_back("group"); }));
  hooks.RunAll();
  CHECK(ran == std::vector<std::string>{"check"});
  hooks.RunAll();  // the hook added during the last turn runs from this one
  CHECK(ran == std::vector<std::string>{"check", "check", "later"});
}

TEST_CASE("a hook may take itself out while it runs", "[turn_hooks]") {
  TurnHooks hooks;
  int runs = 0;
  auto self = std::make_unique<TurnHooks::Hook>();
  *self = hooks.Add([&] {
    ++runs;
    self.reset();
  });
  hooks.RunAll();
  hooks.RunAll();
  CHECK(runs == 1);
  CHECK(hooks.size() == 0);
}

TEST_CASE("the event loop runs its turn hooks at EndTurn only, never in RunOnce (nested waits)",
          "[turn_hooks]") {
  auto loop = EventLoop::Create({SIGCHLD}, [](int) {});
  REQUIRE(loop.ok());
  int runs = 0;
  const TurnHooks::Hook hook = (*loop)->AfterEachTurn([&] { ++runs; });
  (*loop)->At(std::chrono::steady_clock::now(), [] {});
  (*loop)->RunOnce(std::chrono::steady_clock::now());
  CHECK(runs == 0);
  (*loop)->EndTurn();
  CHECK(runs == 1);
}
