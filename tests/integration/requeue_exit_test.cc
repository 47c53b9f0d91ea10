// Exit codes a scheduler can act on (issue 27, item 4): a job that failed the same deterministic
// way on every attempt exits with --do_not_requeue_exit_code (93), since a requeue would fail
// again; any other failure keeps exit 1. Real jobs, one-node and two-node.

#include <signal.h>

#include <memory>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "tests/master.h"
#include "tests/subprocess.h"

using mxrun::testing::Master;
using mxrun::testing::ProcessResult;
using mxrun::testing::Subprocess;
using namespace std::chrono_literals;

namespace {

// A one-node job of 2 workers running `script` under sh, with `flags`.
ProcessResult ShellJob(const std::string& script, std::vector<std::string> flags = {},
                       int max_restarts = 2) {
  std::vector<std::string> argv{MXRUN_BIN, "--standalone", "--nproc_per_node=2",
                                "--max_restarts=" + std::to_string(max_restarts)};
  argv.insert(argv.end(), flags.begin(), flags.end());
  argv.insert(argv.end(), {"--no_python", "sh", "-c", script});
  return mxrun::testing::Run(argv, {}, 60s);
}

}  // namespace

TEST_CASE("a job failing the same way on every attempt exits 93 (do not requeue), saying why",
          "[requeue]") {
  ProcessResult r = ShellJob("echo 'ValueError: no such dataset'; exit 3");
  INFO(r.out << r.err);
  CHECK(r.exit_code == 93);
  CHECK_THAT(r.err, Catch::Contains("every attempt (3 of them) failed the same way (exit code 3: "
                                    "ValueError: no such dataset): a requeue would too; exit "
                                    "code 93 (do not requeue"));
  // --do_not_requeue_exit_code=0: exit 1, as for any failure; another code is taken as given.
  CHECK(ShellJob("echo 'ValueError: no such dataset'; exit 3", {"--do_not_requeue_exit_code=0"})
            .exit_code == 1);
  CHECK(ShellJob("echo 'ValueError: no such dataset'; exit 3", {"--do_not_requeue_exit_code=75"})
            .exit_code == 75);
}

TEST_CASE("failures that differ between attempts, or that are signals, keep exit 1", "[requeue]") {
  ProcessResult differ = ShellJob("echo \"failed in attempt $TORCHELASTIC_RESTART_COUNT\"; exit 3");
  INFO(differ.out << differ.err);
  CHECK(differ.exit_code == 1);
  CHECK_THAT(differ.err, !Catch::Contains("failed the same way"));
  ProcessResult killed = ShellJob("echo 'about to die'; kill -9 $$");
  INFO(killed.out << killed.err);
  CHECK(killed.exit_code == 1);
  // Once is not a pattern: without restarts the job exits 1.
  CHECK(ShellJob("echo 'ValueError: x'; exit 3", {}, 0).exit_code == 1);
}

TEST_CASE("a two-node job failing the same way on every attempt exits 93 on both nodes",
          "[requeue]") {
  Master master;
  std::vector<std::unique_ptr<Subprocess>> agents;
  for (int i = 0; i < 2; ++i) {
    agents.push_back(std::make_unique<Subprocess>(std::vector<std::string>{
        MXRUN_BIN, "--rdzv_backend=c10d", "--rdzv_endpoint=" + master.endpoint(), "--rdzv_id=same2",
        "--nnodes=2", "--nproc_per_node=1", "--max_restarts=1", "--rdzv_conf=is_host=0",
        "--no_python", "sh", "-c", "echo 'RuntimeError: shape mismatch'; exit 4"}));
  }
  for (auto& agent : agents) {
    ProcessResult r = agent->Wait(60s);
    INFO(r.out << r.err);
    CHECK(r.exit_code == 93);
    CHECK_THAT(r.err, Catch::Contains("(exit code 4: RuntimeError: shape mismatch)"));
  }
}

TEST_CASE("the do-not-requeue exit code flag refuses the codes that mean something else",
          "[requeue]") {
  for (const char* bad : {"2", "1", "126", "x"}) {
    ProcessResult r = ShellJob("exit 0", {std::string("--do_not_requeue_exit_code=") + bad});
    INFO(r.err);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Catch::Contains("0 (off) or an exit code from 4 to 125"));
  }
}
