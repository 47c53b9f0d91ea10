// The fake NVML (tests/fake_nvml) goes first on the library path of the processes a test starts,
// ahead of what the test itself was given: scripts/sanitize.sh thread puts its TSan-built gRPC
// there, and an agent that lost it would load Debian's and report gRPC's own hand-offs as races.
// For the test programs that define FAKE_NVML_DIR.
#pragma once

#include <cstdlib>
#include <string>

namespace mxrun::testing {

inline std::string FakeNvmlLibraryPath() {
  const char* inherited = std::getenv("LD_LIBRARY_PATH");
  std::string path = FAKE_NVML_DIR;
  if (inherited != nullptr && *inherited != '\0') path += std::string(":") + inherited;
  return path;
}

}  // namespace mxrun::testing
