#include "agent/hang/collective_failure.h"

#include <array>
#include <string_view>

namespace mxrun {

std::string CollectiveFailureSign(const WorkerFailure& failure) {
  // PyTorch 2.x's words (c10d's ProcessGroupGloo and ProcessGroupNCCL, Gloo's transport).
  static constexpr std::array<std::string_view, 9> kSigns = {
      "Watchdog caught collective operation timeout",
      "Timed out waiting",  // Gloo: "Timed out waiting 3000ms for recv operation to complete"
      "NCCL error",
      "ncclInternalError",
      "ncclSystemError",
      "ncclRemoteError",
      "ncclUnhandledCudaError",
      "ncclInvalidUsage",
      "DistBackendError",
  };
  auto find = [](const std::string& text) -> std::string {
    for (std::string_view sign : kSigns) {
      if (text.find(sign) != std::string::npos) return std::string(sign);
    }
    return "";
  };
  if (std::string sign = find(failure.message); !sign.empty()) return sign;
  if (std::string sign = find(failure.traceback); !sign.empty()) return sign;
  for (const std::string& line : failure.last_lines) {
    if (std::string sign = find(line); !sign.empty()) return sign;
  }
  return "";
}

}  // namespace mxrun
