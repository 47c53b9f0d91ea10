#pragma once
// What an integration test's Python workers need: the project's Python (PYTHON_BIN, handed to
// mxrun as PYTHON_EXEC) and the checkout's mxrun module on their path.

#include <csignal>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <string>
#include <vector>

#include "tests/subprocess.h"

namespace mxrun::testing {

#if defined(PYTHON_BIN) && defined(PYTHON_MODULE_DIR)
inline std::map<std::string, std::string> PythonWorkerEnv() {
  return {{"PYTHON_EXEC", PYTHON_BIN}, {"PYTHONPATH", PYTHON_MODULE_DIR}};
}

// A site folder in `folder` as the wheel leaves one: its mxrun-auto-progress.pth, and a
// dist-info with its entry points. Workers run through tests/python/frameworks/with_site.py with
// MXRUN_TEST_SITE naming it, as after `pip install mxrun`. Returns the folder's path.
inline std::string MakeWheelSite(const std::string& folder) {
  const std::string site = folder + "/site";
  const std::string info = site + "/mxrun_test-0.dist-info";
  std::filesystem::create_directories(info);
  std::filesystem::copy_file(std::string(PYTHON_MODULE_DIR) + "/mxrun-auto-progress.pth",
                             site + "/mxrun-auto-progress.pth");
  std::filesystem::copy_file(std::string(PYTHON_MODULE_DIR) + "/entry_points.txt",
                             info + "/entry_points.txt");
  std::ofstream(info + "/METADATA") << "Metadata-Version: 2.1\nName: mxrun-test\nVersion: 0\n";
  return site;
}
#endif

#if defined(MXRUN_BIN)
// `mxrun --standalone --nproc_per_node=NPROC FLAGS SCRIPT ARGS EXTRA`: an example job.
inline std::vector<std::string> MxrunExample(const std::string& script,
                                             const std::vector<std::string>& flags,
                                             const std::vector<std::string>& args,
                                             const std::vector<std::string>& extra, int nproc = 2) {
  std::vector<std::string> argv{MXRUN_BIN, "--standalone",
                                "--nproc_per_node=" + std::to_string(nproc)};
  argv.insert(argv.end(), flags.begin(), flags.end());
  argv.push_back(script);
  argv.insert(argv.end(), args.begin(), args.end());
  argv.insert(argv.end(), extra.begin(), extra.end());
  return argv;
}

// `mxrun` for node `node` of a 1:2 job of 2 workers per node on the master at `endpoint`
// (--standby_workers=0, one restart), running `script` with `args`.
inline std::vector<std::string> ElasticNodeArgv(const std::string& endpoint,
                                                const std::string& rdzv_id, int node,
                                                const std::string& script,
                                                const std::vector<std::string>& args) {
  std::vector<std::string> argv{MXRUN_BIN,
                                "--rdzv_backend=c10d",
                                "--rdzv_endpoint=" + endpoint,
                                "--rdzv_id=" + rdzv_id,
                                "--nnodes=1:2",
                                "--node_rank=" + std::to_string(node),
                                "--rdzv_conf=last_call_timeout=10",
                                "--nproc_per_node=2",
                                "--max_restarts=1",
                                "--standby_workers=0",
                                script};
  argv.insert(argv.end(), args.begin(), args.end());
  return argv;
}
#endif

// The pid of `rank` in an example's first {"event": "round", "rank": R, "pid": P ...} line; -1:
// none.
inline int PidOfRank(const std::string& out, int rank) {
  std::smatch m;
  std::regex line("\\{\"event\": \"round\", \"rank\": " + std::to_string(rank) +
                  ", \"pid\": ([0-9]+)");
  return std::regex_search(out, m, line) ? std::stoi(m[1]) : -1;
}

// Loses node 1 of an ElasticNodeArgv job as a host's loss would: its agent and its workers (ranks
// 2 and 3) SIGKILLed at once, the agent reaped. Empty when done, else what went wrong.
inline std::string LoseSecondNode(Subprocess& node1) {
  using namespace std::chrono_literals;
  if (!node1.WaitForStdout("\"rank\": 3, \"pid\"", 1, 10s)) {
    return "no pid of rank 3 (reads its pipe)";
  }
  const int rank2 = PidOfRank(node1.out(), 2), rank3 = PidOfRank(node1.out(), 3);
  if (rank2 <= 0 || rank3 <= 0) return "no pid of rank 2 or 3 in node 1's output";
  for (int pid : {node1.pid(), rank2, rank3}) {
    if (::kill(pid, SIGKILL) != 0) return "cannot SIGKILL pid " + std::to_string(pid);
  }
  node1.Wait(10s);
  return "";
}

}  // namespace mxrun::testing
