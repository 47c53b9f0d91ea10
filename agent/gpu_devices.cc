#include "agent/gpu_devices.h"

#include <dlfcn.h>

#include <cstdio>
#include <cstring>
#include <optional>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "common/visible_devices.h"

namespace mxrun {
namespace {

// NVML's ABI, as nvml.h declares it (kept here: this machine builds without the CUDA toolkit).
using NvmlDevice = void*;
struct NvmlPciInfo {
  char bus_id_legacy[16];
  unsigned int domain;
  unsigned int bus;
  unsigned int device;
  unsigned int pci_device_id;
  unsigned int pci_sub_system_id;
  char bus_id[32];
};

class Nvml {
 public:
  Nvml() {
    library_ = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (library_ == nullptr) return;
    init_ = Load<int (*)()>("nvmlInit_v2");
    shutdown_ = Load<int (*)()>("nvmlShutdown");
    count_ = Load<int (*)(unsigned int*)>("nvmlDeviceGetCount_v2");
    by_index_ = Load<int (*)(unsigned int, NvmlDevice*)>("nvmlDeviceGetHandleByIndex_v2");
    by_uuid_ = Load<int (*)(const char*, NvmlDevice*)>("nvmlDeviceGetHandleByUUID");
    uuid_ = Load<int (*)(NvmlDevice, char*, unsigned int)>("nvmlDeviceGetUUID");
    pci_ = Load<int (*)(NvmlDevice, NvmlPciInfo*)>("nvmlDeviceGetPciInfo_v3");
    is_mig_ = Load<int (*)(NvmlDevice, unsigned int*)>("nvmlDeviceIsMigDeviceHandle");
    parent_ = Load<int (*)(NvmlDevice, NvmlDevice*)>("nvmlDeviceGetDeviceHandleFromMigDeviceHandle");
    ready_ = init_ != nullptr && by_index_ != nullptr && pci_ != nullptr && init_() == 0;
  }
  ~Nvml() {
    if (ready_ && shutdown_ != nullptr) shutdown_();
    if (library_ != nullptr) dlclose(library_);
  }
  bool ready() const { return ready_; }

  std::string BusIdOf(const std::string& entry) const {
    std::optional<NvmlDevice> device = Find(entry);
    if (!device) return "";
    unsigned int mig = 0;
    if (is_mig_ != nullptr && parent_ != nullptr && is_mig_(*device, &mig) == 0 && mig != 0) {
      NvmlDevice parent = nullptr;
      if (parent_(*device, &parent) != 0) return "";
      device = parent;
    }
    NvmlPciInfo info{};
    if (pci_(*device, &info) != 0) return "";
    char bus_id[32];
    std::snprintf(bus_id, sizeof bus_id, "%04x:%02x:%02x.0", info.domain & 0xffff, info.bus,
                  info.device);
    return bus_id;
  }

 private:
  template <typename Fn>
  Fn Load(const char* name) {
    return reinterpret_cast<Fn>(dlsym(library_, name));
  }

  std::optional<NvmlDevice> Find(const std::string& entry) const {
    NvmlDevice device = nullptr;
    int index = 0;
    if (absl::SimpleAtoi(entry, &index)) {
      if (index < 0 || by_index_(static_cast<unsigned int>(index), &device) != 0) return std::nullopt;
      return device;
    }
    // Old-style MIG names the GPU first: MIG-GPU-<uuid>/<gi>/<ci>.
    std::string uuid = entry;
    if (absl::StartsWith(uuid, "MIG-GPU-")) uuid = uuid.substr(4, uuid.find('/') - 4);
    if (by_uuid_ != nullptr && by_uuid_(uuid.c_str(), &device) == 0) return device;
    // CUDA also takes a unique prefix of a GPU's UUID.
    unsigned int count = 0;
    if (count_ == nullptr || uuid_ == nullptr || count_(&count) != 0) return std::nullopt;
    std::optional<NvmlDevice> match;
    for (unsigned int i = 0; i < count; ++i) {
      NvmlDevice candidate = nullptr;
      char text[96] = {};
      if (by_index_(i, &candidate) != 0 || uuid_(candidate, text, sizeof text) != 0) continue;
      if (absl::StartsWith(text, uuid)) {
        if (match) return std::nullopt;  // ambiguous
        match = candidate;
      }
    }
    return match;
  }

  void* library_ = nullptr;
  bool ready_ = false;
  int (*init_)() = nullptr;
  int (*shutdown_)() = nullptr;
  int (*count_)(unsigned int*) = nullptr;
  int (*by_index_)(unsigned int, NvmlDevice*) = nullptr;
  int (*by_uuid_)(const char*, NvmlDevice*) = nullptr;
  int (*uuid_)(NvmlDevice, char*, unsigned int) = nullptr;
  int (*pci_)(NvmlDevice, NvmlPciInfo*) = nullptr;
  int (*is_mig_)(NvmlDevice, unsigned int*) = nullptr;
  int (*parent_)(NvmlDevice, NvmlDevice*) = nullptr;
};

}  // namespace

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

}  // namespace mxrun
