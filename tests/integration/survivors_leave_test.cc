// The stop after a worker's death lets the others leave by themselves (agent/workers/
// survivors_leave.h): rank 1 of a real Gloo group exits, rank 0's all-reduce fails and it exits on
// its own; a SIGTERM that reached it meanwhile would cost 3 s (its handler stands for Lightning's
// broadcast on the broken group). mxrun must not send it, whether rank 0's exit is quick or takes
// longer than the plain wait (its interpreter then says {"leaving": true} through the mxrun
// module).

#include <catch2/catch.hpp>

#include <regex>
#include <string>

#include "tests/python_workers.h"
#include "tests/subprocess.h"

using namespace std::chrono_literals;
using mxrun::testing::Describe;
using mxrun::testing::ProcessResult;

namespace {

// The "stop S s" of mxrun's restart line; -1 when there is none.
double StopSeconds(const std::string& err) {
  std::smatch m;
  if (!std::regex_search(err, m, std::regex("restart 1 \\(round 1; [^)]*\\): stop ([0-9.]+) s"))) {
    return -1;
  }
  return std::stod(m[1]);
}

ProcessResult RunPeerDeath(const std::string& slow_exit) {
  return mxrun::testing::Run(
      {MXRUN_BIN, "--standalone", "--nproc_per_node=2", "--max_restarts=1", "--standby_workers=0",
       std::string(PYTHON_TESTS_DIR) + "/peer_death_worker.py", slow_exit},
      mxrun::testing::PythonWorkerEnv(), 120s);
}

}  // namespace

TEST_CASE(
    "after a worker's death the others leave by themselves, unsignalled: quickly, or "
    "slowly once their interpreter said it is leaving",
    "[integration][restart]") {
  for (const std::string slow_exit : {"0", "1.0"}) {
    INFO("rank 0's exit takes " << slow_exit << " s more");
    const ProcessResult result = RunPeerDeath(slow_exit);
    INFO(Describe(result));
    REQUIRE(result.exit_code == 0);
    CHECK_THAT(result.out, Catch::Contains("rank 1 dies"));
    CHECK_THAT(result.out, !Catch::Contains("got SIGTERM"));
    CHECK_THAT(result.out, Catch::Contains("rank 0 attempt 1"));
    // The stop is timed (the restart line has it); no bound on it here: rank 0's own exit takes
    // 1 s more and the rest depends on the machine's load (2.97 s seen with other jobs beside
    // the suite). The handler's own line, checked above, says whether a SIGTERM came.
    CHECK(StopSeconds(result.err) >= 0);
  }
}
