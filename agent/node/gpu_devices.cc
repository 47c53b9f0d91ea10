#include "agent/node/gpu_devices.h"

#include <optional>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "agent/node/nvml.h"
#include "common/visible_devices.h"

namespace mxrun {

std::vector<std::string> WorkerGpuBusIds(const EnvMap& agent_env, int local_world_size,
                                         const NumaTopology& topology) {
  // A saved topology (HWLOC_XMLFILE) describes another machine: this one's NVML does not apply.
  const bool saved_topology = agent_env.count("HWLOC_XMLFILE") > 0;
  std::optional<Nvml> nvml;
  if (!saved_topology) nvml.emplace();
  std::vector<std::string> bus_ids;
  for (int rank = 0; rank < local_world_size; ++rank) {
    std::string bus_id;
    if (std::optional<std::string> entry = DeviceOfLocalRank(agent_env, rank)) {
      if (nvml && nvml->ready()) {
        bus_id = nvml->BusIdOf(*entry);
      } else if (int index = 0; absl::SimpleAtoi(*entry, &index) && index >= 0 &&
                                index < static_cast<int>(topology.gpus.size())) {
        bus_id = topology.gpus[index].bus_id;
      }
    }
    bus_ids.push_back(absl::AsciiStrToLower(bus_id));
  }
  return bus_ids;
}

std::string NvlinkDomainOf(const EnvMap& agent_env) {
  const std::optional<std::string> entry = DeviceOfLocalRank(agent_env, 0);
  if (!entry) return "";
  Nvml nvml;
  if (!nvml.ready()) return "";
  const std::optional<Nvml::Device> device = nvml.Find(*entry);
  if (!device) return "";
  return nvml.FabricDomain(*device).value_or("");
}

}  // namespace mxrun
