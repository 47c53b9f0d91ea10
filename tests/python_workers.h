#pragma once
// What an integration test's Python workers need: the project's Python (PYTHON_BIN, handed to
// mxrun as PYTHON_EXEC) and the checkout's mxrun module on their path.

#include <map>
#include <regex>
#include <string>
#include <vector>

namespace mxrun::testing {

#if defined(PYTHON_BIN) && defined(PYTHON_MODULE_DIR)
inline std::map<std::string, std::string> PythonWorkerEnv() {
  return {{"PYTHON_EXEC", PYTHON_BIN}, {"PYTHONPATH", PYTHON_MODULE_DIR}};
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
#endif

// The pid of `rank` in an example's first {"event": "round", "rank": R, "pid": P ...} line; -1: none.
inline int PidOfRank(const std::string& out, int rank) {
  std::smatch m;
  std::regex line("\\{\"event\": \"round\", \"rank\": " + std::to_string(rank) +
                  ", \"pid\": ([0-9]+)");
  return std::regex_search(out, m, line) ? std::stoi(m[1]) : -1;
}

}  // namespace mxrun::testing
