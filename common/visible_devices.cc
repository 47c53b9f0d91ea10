#include "common/visible_devices.h"

namespace mxrun {
namespace {

std::string Strip(const std::string& text) {
  const char* blanks = " \t\r\n";
  const size_t begin = text.find_first_not_of(blanks);
  if (begin == std::string::npos) return "";
  return text.substr(begin, text.find_last_not_of(blanks) - begin + 1);
}

}  // namespace

std::vector<std::string> SplitVisibleDevices(const std::string& cuda_visible_devices) {
  std::vector<std::string> devices;
  size_t start = 0;
  while (true) {
    const size_t comma = cuda_visible_devices.find(',', start);
    devices.push_back(Strip(cuda_visible_devices.substr(start, comma - start)));
    if (comma == std::string::npos) return devices;
    start = comma + 1;
  }
}

std::optional<std::string> DeviceOfLocalRank(const EnvMap& agent_env, int local_rank) {
  auto it = agent_env.find("CUDA_VISIBLE_DEVICES");
  if (it == agent_env.end()) return std::to_string(local_rank);
  std::vector<std::string> devices = SplitVisibleDevices(it->second);
  if (local_rank < 0 || local_rank >= static_cast<int>(devices.size())) return std::nullopt;
  return devices[local_rank];
}

}  // namespace mxrun
