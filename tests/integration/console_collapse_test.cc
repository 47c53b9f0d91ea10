// One line instead of world-size copies (issue 37, item 2): real mxrun processes and test_child
// workers that print the same line at the same moment (--say-at), and lines of their own.

#include <catch2/catch.hpp>

#include <time.h>

#include <chrono>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "tests/subprocess.h"
#include "tests/temp_dir.h"

using mxrun::testing::CountOccurrences;
using mxrun::testing::ProcessResult;
using mxrun::testing::Run;
using mxrun::testing::TempDir;
using namespace std::chrono_literals;

namespace {

// A moment `seconds` from now, as test_child --say-at takes it.
std::string SecondsFromNow(double seconds) {
  timespec now{};
  clock_gettime(CLOCK_REALTIME, &now);
  return std::to_string(static_cast<double>(now.tv_sec) + now.tv_nsec / 1e9 + seconds);
}

ProcessResult SayTogether(int ranks, std::vector<std::string> flags) {
  flags.insert(flags.begin(), {"--standalone", "--nproc_per_node=" + std::to_string(ranks)});
  // Every rank prints the warning at the same moment (3 s on: all of them have started), then a
  // line of its own ("said rank=R").
  return Run(mxrun::testing::MxrunWithChild(
                 flags, {"--say=UserWarning: this is deprecated", "--say-at=" + SecondsFromNow(3)}),
             {}, 90s);
}

}  // namespace

TEST_CASE(
    "a line 64 ranks print at once reaches the console once with their ranks and the log "
    "files keep every copy",
    "[integration][collapse]") {
  TempDir dir;
  ProcessResult r = SayTogether(64, {"--log_dir=" + dir.path(), "--tee=3"});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(CountOccurrences(r.out, "UserWarning: this is deprecated") == 1);
  CHECK_THAT(r.out, Catch::Contains("[n0 r0-63] UserWarning: this is deprecated\n"));
  // Lines that differ are each shown with their own rank.
  CHECK(CountOccurrences(r.out, "said rank=") == 64);
  CHECK_THAT(r.out, Catch::Contains("[n0 r17] said rank=17\n"));
  ProcessResult files = Run({"sh", "-c", "cat " + dir.path() + "/*/attempt_0/*/stdout.log"});
  CHECK(CountOccurrences(files.out, "UserWarning: this is deprecated") == 64);
}

TEST_CASE("with the window at 0 every rank's copy is shown and json records carry the ranks",
          "[integration][collapse]") {
  ProcessResult off = SayTogether(4, {"--log_collapse_window=0"});
  INFO(off.err);
  REQUIRE(off.exit_code == 0);
  CHECK(CountOccurrences(off.out, "UserWarning: this is deprecated") == 4);
  CHECK_THAT(off.out, Catch::Contains("[n0 r2] UserWarning: this is deprecated\n"));

  ProcessResult json = SayTogether(4, {"--log_format=json"});
  INFO(json.err);
  REQUIRE(json.exit_code == 0);
  int warnings = 0;
  for (size_t at = 0, end; (end = json.out.find('\n', at)) != std::string::npos; at = end + 1) {
    const nlohmann::json record = nlohmann::json::parse(json.out.substr(at, end - at));
    if (record["line"] != "UserWarning: this is deprecated") continue;
    ++warnings;
    CHECK(record["ranks"] == nlohmann::json({0, 1, 2, 3}));
    CHECK(record["local_ranks"] == nlohmann::json({0, 1, 2, 3}));
    CHECK(record["rank"] == 0);
  }
  CHECK(warnings == 1);
}

TEST_CASE("a failed worker's last lines reach the console before the agent's word on it",
          "[integration][collapse]") {
  // A 5 s window, but the failure lets the pending lines out at once: the worker's last words
  // (stderr, like the agent's log) come before the agent's line about its failure.
  ProcessResult r = Run(mxrun::testing::MxrunWithChild(
                            {"--standalone", "--nproc_per_node=2", "--log_collapse_window=5"},
                            {"--say=last words", "--say-stderr", "--exit=3", "--only-rank=1"}),
                        {}, 60s);
  INFO(r.err);
  CHECK(r.exit_code == 1);
  const size_t words = r.err.find("] last words\n");
  const size_t failed = r.err.find("worker rank 1 (local_rank 1");
  REQUIRE(words != std::string::npos);
  REQUIRE(failed != std::string::npos);
  CHECK(words < failed);
}
