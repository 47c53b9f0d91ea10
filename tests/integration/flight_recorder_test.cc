// PyTorch's flight recorder from every rank on a hang, with real PyTorch Gloo workers under a real
// mxrun: mxrun turns the recorder on, takes every live rank's dump before stopping anything, runs
// the verdict (the rank behind, PyTorch's own analyzer) and puts it in the failure summary
// (agent/hang/flight_records.h). The Python halves' own tests:
// tests/python/test_flight_recorder.py.

#include <catch2/catch.hpp>

#include <filesystem>
#include <regex>

#include "rendezvous/net.h"
#include "tests/python_workers.h"
#include "tests/subprocess.h"
#include "tests/temp_dir.h"

using namespace std::chrono_literals;
using mxrun::testing::Describe;
using mxrun::testing::ProcessResult;
using mxrun::testing::PythonWorkerEnv;
using mxrun::testing::Run;
using mxrun::testing::Subprocess;
using mxrun::testing::TempDir;

namespace {

const std::string kWorker = std::string(PYTHON_TESTS_DIR) + "/collective_hang_worker.py";

ProcessResult RunHang(int nproc, std::vector<std::string> worker_args,
                      std::map<std::string, std::string> env = {}) {
  std::vector<std::string> argv{MXRUN_BIN,
                                "--standalone",
                                "--nproc_per_node=" + std::to_string(nproc),
                                "--hang_timeout=3",
                                "--max_restarts=0",
                                "--log_collapse_window=0",
                                kWorker};
  argv.insert(argv.end(), worker_args.begin(), worker_args.end());
  for (const auto& [key, value] : PythonWorkerEnv()) env.emplace(key, value);
  return Run(argv, env, 120s);
}

std::string DiagnosticsDir(const std::string& err) {
  std::smatch m;
  REQUIRE(std::regex_search(err, m, std::regex("diagnostics: (\\S+) \\(on that host\\)")));
  return m[1];
}

}  // namespace

TEST_CASE(
    "a hang's summary names the rank behind and the collective its peers wait in, from "
    "every rank's flight recorder",
    "[integration][flight_recorder]") {
  TempDir tmp;  // the hang folder lands in TMPDIR (no --log_dir)
  ProcessResult r = RunHang(3, {"1", "4"}, {{"TMPDIR", tmp.path()}});
  INFO(Describe(r));
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.err, Catch::Contains("flight recorder: dumps of ranks 0,1,2 (3 of 3 ranks here)"));
  CHECK(std::regex_search(
      r.err,
      std::regex(
          "flight recorder: group 0 \\(default_pg\\): rank 1 behind at collective 3; ranks 0,2 "
          "waiting in collective 4 \\(gloo:all_reduce, sizes \\[\\[16\\]\\], called at "
          "collective_hang_worker.py:[0-9]+\\)")));
  CHECK_THAT(r.err, Catch::Contains("flight recorder: PyTorch's analyzer: collective 4 "
                                    "(gloo:all_reduce, group 0:default_pg, sizes [[16]]): ranks "
                                    "{1} did not join"));
  const std::filesystem::path folder =
      std::filesystem::path(DiagnosticsDir(r.err)) / "flight_recorder";
  for (const char* file : {"rank0.json", "rank1.json", "rank2.json", "analysis.txt"}) {
    CHECK(std::filesystem::is_regular_file(folder / file));
  }
}

TEST_CASE("a script that never imports mxrun serves no recorder, and the summary says so",
          "[integration][flight_recorder]") {
  TempDir tmp;
  ProcessResult r = RunHang(2, {"1", "4", "--heartbeat-file"}, {{"TMPDIR", tmp.path()}});
  INFO(Describe(r));
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.err, Catch::Contains("flight recorder: rank 0: no dump: it serves no flight "
                                    "recorder (the script never called mxrun.step_done"));
  CHECK_THAT(r.err, !Catch::Contains("PyTorch's analyzer"));
}

TEST_CASE("TORCH_FR_BUFFER_SIZE=0 from the user turns the recorder off: nothing is asked",
          "[integration][flight_recorder]") {
  TempDir tmp;
  ProcessResult r = RunHang(2, {"1", "4"}, {{"TMPDIR", tmp.path()}, {"TORCH_FR_BUFFER_SIZE", "0"}});
  INFO(Describe(r));
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.err, Catch::Contains("hung (heartbeat)"));
  CHECK_THAT(r.err, !Catch::Contains("flight recorder"));
}

TEST_CASE(
    "a collective that gave up (a Gloo timeout) has its peers' recorders taken before "
    "anything stops, and the failed rank's own, written as it died",
    "[integration][flight_recorder]") {
  TempDir tmp;
  std::vector<std::string> argv{MXRUN_BIN,
                                "--standalone",
                                "--nproc_per_node=3",
                                "--max_restarts=0",
                                "--log_collapse_window=0",
                                kWorker,
                                "1",
                                "4",
                                "--timeout=3"};
  std::map<std::string, std::string> env = PythonWorkerEnv();
  env["TMPDIR"] = tmp.path();
  ProcessResult r = Run(argv, env, 120s);
  INFO(Describe(r));
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.err, Catch::Contains("collective : failed (\"Timed out waiting\")"));
  // Rank 0 or 2 raised first; the other may have died too by the time it was asked: either way
  // its dump is there, from its socket or written as it died.
  CHECK(std::regex_search(
      r.err,
      std::regex(
          "flight recorder: dumps of ranks 0,1,2 \\(3 of 3 ranks here; ranks? [02,]+ written as")));
  CHECK(std::regex_search(
      r.err,
      std::regex(
          "flight recorder: group 0 \\(default_pg\\): rank 1 behind at collective 3; ranks 0,2 "
          "waiting in collective 4")));
}

// Two nodes of one Gloo worker each; rank 1 (node 1) never joins step 4's all-reduce. Both nodes
// judge the hang at once (each waits for the other's set), or only node 0 does (node 1 has no
// --hang_timeout) and node 1 is asked for its ranks' recorders.
void TwoNodeHang(bool node1_judges) {
  TempDir tmp;
  absl::StatusOr<int> port = mxrun::PickFreePort("127.0.0.1");
  REQUIRE(port.ok());
  std::map<std::string, std::string> env = PythonWorkerEnv();
  env["TMPDIR"] = tmp.path();
  auto node = [&](int rank) {
    std::vector<std::string> argv{MXRUN_BIN,
                                  "--nnodes=2",
                                  "--node_rank=" + std::to_string(rank),
                                  "--master_addr=127.0.0.1",
                                  "--master_port=" + std::to_string(*port),
                                  "--nproc_per_node=1",
                                  "--max_restarts=0",
                                  kWorker,
                                  "1",
                                  "4"};
    if (rank == 0 || node1_judges) argv.insert(argv.begin() + 1, "--hang_timeout=3");
    return std::make_unique<Subprocess>(argv, env);
  };
  auto n0 = node(0);
  auto n1 = node(1);
  ProcessResult r0 = n0->Wait(120s);
  ProcessResult r1 = n1->Wait(120s);
  if (!node1_judges) {
    CHECK_THAT(r1.err,
               Catch::Contains("judged a hang: taking the flight recorders of this node's 1 "
                               "running rank(s) before anything stops"));
  }
  for (const ProcessResult* r : {&r0, &r1}) {
    INFO(r->err);
    CHECK(r->exit_code == 1);
    // Every node prints the job's summary: the first hang reported, with its node's verdict over
    // both nodes' dumps.
    CHECK_THAT(r->err, Catch::Contains("flight recorder: dumps of 1 of 1 ranks on other nodes "
                                       "gathered through the master"));
    CHECK(std::regex_search(
        r->err,
        std::regex(
            "flight recorder: group 0 \\(default_pg\\): rank 1 behind at collective 3; rank 0 "
            "waiting in collective 4 \\(gloo:all_reduce")));
    CHECK_THAT(r->err, Catch::Contains("ranks {1} did not join"));
  }
}

TEST_CASE(
    "on two nodes, the node that judged the hang gathers the other node's recorders "
    "through the master before anything stops, and the verdict names the rank behind",
    "[integration][flight_recorder][multinode]") {
  TwoNodeHang(/*node1_judges=*/false);
}

TEST_CASE("on two nodes that both judge the hang at once, each gets the other's recorders",
          "[integration][flight_recorder][multinode]") {
  TwoNodeHang(/*node1_judges=*/true);
}
