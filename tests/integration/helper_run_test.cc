// RunHelper (agent/helper_run.h): a helper program run to its end under a deadline, with real
// processes. The deadline case waits its 0.3 s, so it lives here rather than with the unit tests.

#include <catch2/catch.hpp>

#include <signal.h>

#include <chrono>
#include <fstream>
#include <string>
#include <thread>

#include "agent/helper_run.h"

using namespace std::chrono_literals;

namespace {

// Whether `pid` still runs (a zombie, or no process at all, does not).
bool Running(int pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return false;
  const size_t close = line.rfind(')');
  return close != std::string::npos && close + 2 < line.size() && line[close + 2] != 'Z';
}

}  // namespace

TEST_CASE("a helper's exit code and output (stdout and stderr) come back", "[helper]") {
  mxrun::HelperOptions options;
  options.timeout = 20s;
  options.env = {"GREETING=hello", "PATH=/usr/bin:/bin"};
  auto run = mxrun::RunHelper("/bin/sh", {"sh", "-c", "echo $GREETING; echo oops >&2; exit 3"},
                              options);
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
  const int sleeper = std::stoi(run->output);
  // SIGKILL went to its whole process group; the kernel ends it a moment later.
  const auto bound = std::chrono::steady_clock::now() + 5s;
  while (Running(sleeper) && std::chrono::steady_clock::now() < bound) {
    std::this_thread::sleep_for(10ms);
  }
  CHECK_FALSE(Running(sleeper));
}

TEST_CASE("a helper that cannot start is an error, not an exit code", "[helper]") {
  auto run = mxrun::RunHelper("/nonexistent/helper", {"helper"}, {});
  REQUIRE_FALSE(run.ok());
  CHECK_THAT(std::string(run.status().message()), Catch::Contains("/nonexistent/helper"));
}
