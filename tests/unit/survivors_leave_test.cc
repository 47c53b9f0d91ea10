#include <signal.h>
#include <unistd.h>

#include <catch2/catch.hpp>

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
