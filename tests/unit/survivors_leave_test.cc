#include <signal.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <map>
#include <vector>

#include "agent/process/event_loop.h"
#include "agent/workers/survivors_leave.h"

namespace {
void Ignore(int) {}
}  // namespace

TEST_CASE(
    "survivors: a worker that handles the stop signal is told apart from one that the "
    "signal ends at once",
    "[survivors]") {
  mxrun::WorkerProcess me(1);
  me.pid = getpid();
  struct sigaction handled {
  }, before{};
  handled.sa_handler = Ignore;
  REQUIRE(sigaction(SIGUSR2, &handled, &before) == 0);
  CHECK(mxrun::HandlesSignal(me, SIGUSR2));
  struct sigaction plain {};
  plain.sa_handler = SIG_DFL;
  REQUIRE(sigaction(SIGUSR2, &plain, nullptr) == 0);
  CHECK_FALSE(mxrun::HandlesSignal(me, SIGUSR2));
  REQUIRE(sigaction(SIGUSR2, &before, nullptr) == 0);

  mxrun::WorkerProcess gone(1);
  gone.pid = 0x3fffffff;  // no such process: as if it handled nothing (signalled at once)
  CHECK_FALSE(mxrun::HandlesSignal(gone, SIGTERM));

  mxrun::WorkerFailure death;
  CHECK(mxrun::SurvivorsMayLeave(death));
  mxrun::WorkerFailure hang;
  hang.hang.rule = "heartbeat";
  CHECK_FALSE(mxrun::SurvivorsMayLeave(hang));
}

TEST_CASE(
    "survivors: one that stops handling the stop signal while waited for (its interpreter is "
    "finalizing) is signalled at once, and each is signalled once",
    "[survivors]") {
  auto loop = mxrun::EventLoop::Create({SIGCHLD}, [](int) {});
  REQUIRE(loop.ok());
  mxrun::WorkerProcess plain(1), finalizing(1);
  plain.pid = 101;       // never handles it: signalled before any wait
  finalizing.pid = 102;  // handles it when first asked, no longer at the next look
  plain.running = finalizing.running = true;
  std::map<pid_t, int> asked;
  auto handles = [&asked](const mxrun::WorkerProcess& worker, int) {
    return worker.pid == 102 && ++asked[worker.pid] == 1;
  };
  std::vector<pid_t> signalled;
  auto signal = [&signalled](mxrun::WorkerProcess& worker) { signalled.push_back(worker.pid); };
  int reaps = 0;
  mxrun::WorkerFailure death;
  mxrun::SignalSurvivors(
      **loop, {&plain, &finalizing}, SIGTERM, &death, signal, [&reaps] { ++reaps; }, handles);
  // Both signalled, once each, with no turn of the loop waited: the old wait would have let the
  // finalizing one run for kSurvivorsLeave before its signal.
  CHECK(signalled == std::vector<pid_t>{101, 102});
  CHECK(reaps == 0);
  CHECK(asked[102] == 2);

  // With no failure (a stop asked for) or after a hang, all at once, without asking.
  signalled.clear();
  asked.clear();
  mxrun::SignalSurvivors(
      **loop, {&plain, &finalizing}, SIGTERM, nullptr, signal, [] {}, handles);
  CHECK(signalled == std::vector<pid_t>{101, 102});
  CHECK(asked.empty());
  mxrun::WorkerFailure hang;
  hang.hang.rule = "heartbeat";
  signalled.clear();
  mxrun::SignalSurvivors(
      **loop, {&plain, &finalizing}, SIGTERM, &hang, signal, [] {}, handles);
  CHECK(signalled == std::vector<pid_t>{101, 102});
  CHECK(asked.empty());
}
