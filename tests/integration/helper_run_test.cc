// RunHelper (agent/process/helper_run.h): a helper program run to its end under a deadline, with
// real processes. The deadline case waits its 0.3 s, so it lives here rather than with the unit
// tests.

#include <catch2/catch.hpp>

#include <poll.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <string>

#include "agent/process/helper_run.h"

using namespace std::chrono_literals;

namespace {

// Waits (bounded) until `pid`, not a child of ours, has ended: its pidfd becomes readable then.
bool Ended(int pid, std::chrono::milliseconds bound) {
  const int fd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
  if (fd < 0) return errno == ESRCH;  // gone already
  pollfd p{fd, POLLIN, 0};
  const bool ended = poll(&p, 1, static_cast<int>(bound.count())) == 1;
  close(fd);
  return ended;
}

}  // namespace

TEST_CASE("a helper's exit code and output (stdout and stderr) come back", "[helper]") {
  mxrun::HelperOptions options;
  options.timeout = 20s;
  options.env = {"GREETING=hello", "PATH=/usr/bin:/bin"};
  auto run =
      mxrun::RunHelper("/bin/sh", {"sh", "-c", "echo $GREETING; echo oops >&2; exit 3"}, options);
  REQUIRE(run.ok());
  CHECK_FALSE(run->timed_out);
  CHECK(run->exited);
  CHECK(run->exit_code == 3);
  CHECK_FALSE(run->ok());
  CHECK(run->output == "hello\noops\n");
  CHECK(run->Describe(options.timeout) == "exited 3");

  options.capture_stderr = false;  // to /dev/null
  run = mxrun::RunHelper("/bin/sh", {"sh", "-c", "echo out; echo err >&2"}, options);
  REQUIRE(run.ok());
  CHECK(run->ok());
  CHECK(run->output == "out\n");
}

TEST_CASE("a helper past its deadline is killed with everything it started", "[helper]") {
  mxrun::HelperOptions options;
  options.timeout = 300ms;
  options.env = {"PATH=/usr/bin:/bin"};
  auto run = mxrun::RunHelper("/bin/sh", {"sh", "-c", "sleep 60 & echo $!; wait"}, options);
  REQUIRE(run.ok());
  CHECK(run->timed_out);
  CHECK(run->Describe(options.timeout) == "did not finish in 0.3 s");
  // SIGKILL went to its whole process group; the kernel ends the sleeper a moment later.
  CHECK(Ended(std::stoi(run->output), 5s));
}

TEST_CASE("a helper that cannot start is an error, not an exit code", "[helper]") {
  auto run = mxrun::RunHelper("/nonexistent/helper", {"helper"}, {});
  REQUIRE_FALSE(run.ok());
  CHECK_THAT(std::string(run.status().message()), Catch::Contains("/nonexistent/helper"));
}
