#pragma once
// What an integration test's Python workers need: the project's Python (PYTHON_BIN, handed to
// mxrun as PYTHON_EXEC) and the checkout's mxrun module on their path.

#include <map>
#include <string>

namespace mxrun::testing {

#if defined(PYTHON_BIN) && defined(PYTHON_MODULE_DIR)
inline std::map<std::string, std::string> PythonWorkerEnv() {
  return {{"PYTHON_EXEC", PYTHON_BIN}, {"PYTHONPATH", PYTHON_MODULE_DIR}};
}
#endif

}  // namespace mxrun::testing
