// MXRUN_TEST_TORCH_ENV (tests/test_paths.h): another PyTorch environment's python3 and torchrun in
// place of the build's, for the tests that compare mxrun with torchrun.
#include <cstdio>
#include <cstdlib>
#include <string>

#include <unistd.h>

#include "tests/test_paths.h"

namespace mxrun::test_paths {

const char* TorchEnvTool(const char* tool, const char* built) {
  const char* env = std::getenv("MXRUN_TEST_TORCH_ENV");
  if (env == nullptr || *env == '\0') return built;
  // Kept for the program's life: the paths are read as const char* from static constants.
  auto* path = new std::string(std::string(env) + "/bin/" + tool);
  if (access(path->c_str(), X_OK) != 0) {
    std::fprintf(stderr, "MXRUN_TEST_TORCH_ENV=%s has no %s\n", env, path->c_str());
    std::exit(2);
  }
  return path->c_str();
}

}  // namespace mxrun::test_paths
