#include "agent/node/nvml.h"

#include <dlfcn.h>

#include <cstdio>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"

namespace mxrun {

namespace {
constexpr int kNvmlInsufficientSize = 7;  // NVML_ERROR_INSUFFICIENT_SIZE
}  // namespace

template <typename Fn>
Fn Nvml::Load(const char* name) {
  return reinterpret_cast<Fn>(dlsym(library_, name));
}

Nvml::Nvml() {
  library_ = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (library_ == nullptr) return;
  init_ = Load<int (*)()>("nvmlInit_v2");
  shutdown_ = Load<int (*)()>("nvmlShutdown");
  count_ = Load<int (*)(unsigned int*)>("nvmlDeviceGetCount_v2");
  by_index_ = Load<int (*)(unsigned int, Device*)>("nvmlDeviceGetHandleByIndex_v2");
  by_uuid_ = Load<int (*)(const char*, Device*)>("nvmlDeviceGetHandleByUUID");
  uuid_ = Load<int (*)(Device, char*, unsigned int)>("nvmlDeviceGetUUID");
  pci_ = Load<int (*)(Device, PciInfo*)>("nvmlDeviceGetPciInfo_v3");
  is_mig_ = Load<int (*)(Device, unsigned int*)>("nvmlDeviceIsMigDeviceHandle");
  parent_ = Load<int (*)(Device, Device*)>("nvmlDeviceGetDeviceHandleFromMigDeviceHandle");
  memory_ = Load<int (*)(Device, Memory*)>("nvmlDeviceGetMemoryInfo");
  processes_ =
      Load<int (*)(Device, unsigned int*, ProcessInfo*)>("nvmlDeviceGetComputeRunningProcesses_v3");
  retired_pending_ = Load<int (*)(Device, int*)>("nvmlDeviceGetRetiredPagesPendingStatus");
  remapped_rows_ =
      Load<int (*)(Device, unsigned int*, unsigned int*, unsigned int*, unsigned int*)>(
          "nvmlDeviceGetRemappedRows");
  fabric_info_ = Load<int (*)(Device, FabricInfo*)>("nvmlDeviceGetGpuFabricInfo");
  event_set_create_ = Load<int (*)(void**)>("nvmlEventSetCreate");
  event_set_free_ = Load<int (*)(void*)>("nvmlEventSetFree");
  register_events_ = Load<int (*)(Device, unsigned long long, void*)>("nvmlDeviceRegisterEvents");
  event_wait_ = Load<int (*)(void*, EventData*, unsigned int)>("nvmlEventSetWait_v2");
  ready_ = init_ != nullptr && by_index_ != nullptr && init_() == 0;
}

Nvml::~Nvml() {
  if (event_set_ != nullptr && event_set_free_ != nullptr) event_set_free_(event_set_);
  if (ready_ && shutdown_ != nullptr) shutdown_();
  if (library_ != nullptr) dlclose(library_);
}

std::optional<unsigned int> Nvml::DeviceCount() const {
  unsigned int count = 0;
  if (!ready_ || count_ == nullptr || count_(&count) != 0) return std::nullopt;
  return count;
}

std::optional<Nvml::Device> Nvml::Find(const std::string& entry) const {
  if (!ready_) return std::nullopt;
  Device device = nullptr;
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
  std::optional<Device> match;
  for (unsigned int i = 0; i < count; ++i) {
    Device candidate = nullptr;
    char text[96] = {};
    if (by_index_(i, &candidate) != 0 || uuid_(candidate, text, sizeof text) != 0) continue;
    if (absl::StartsWith(text, uuid)) {
      if (match) return std::nullopt;  // ambiguous
      match = candidate;
    }
  }
  return match;
}

std::string Nvml::BusIdOf(const std::string& entry) const {
  std::optional<Device> device = Find(entry);
  if (!device || pci_ == nullptr) return "";
  unsigned int mig = 0;
  if (is_mig_ != nullptr && parent_ != nullptr && is_mig_(*device, &mig) == 0 && mig != 0) {
    Device parent = nullptr;
    if (parent_(*device, &parent) != 0) return "";
    device = parent;
  }
  PciInfo info{};
  if (pci_(*device, &info) != 0) return "";
  char bus_id[32];
  std::snprintf(bus_id, sizeof bus_id, "%04x:%02x:%02x.0", info.domain & 0xffff, info.bus,
                info.device);
  return bus_id;
}

std::optional<unsigned long long> Nvml::UsedBytes(Device device) const {
  Memory memory{};
  if (memory_ == nullptr || memory_(device, &memory) != 0) return std::nullopt;
  return memory.used;
}

std::optional<unsigned long long> Nvml::FreeBytes(Device device) const {
  Memory memory{};
  if (memory_ == nullptr || memory_(device, &memory) != 0) return std::nullopt;
  return memory.free;
}

std::optional<bool> Nvml::RetiredPagesPending(Device device) const {
  int pending = 0;  // nvmlEnableState_t
  if (retired_pending_ == nullptr || retired_pending_(device, &pending) != 0) return std::nullopt;
  return pending != 0;
}

std::optional<std::string> Nvml::FabricDomain(Device device) const {
  FabricInfo info{};
  if (fabric_info_ == nullptr || fabric_info_(device, &info) != 0) return std::nullopt;
  if (info.state != 3 || info.status != 0) return std::nullopt;  // not (yet) in a fabric
  static const char kHex[] = "0123456789abcdef";
  std::string domain = "nvl:";
  bool all_zero = true;
  for (unsigned char byte : info.cluster_uuid) {
    domain.push_back(kHex[byte >> 4]);
    domain.push_back(kHex[byte & 15]);
    all_zero = all_zero && byte == 0;
  }
  if (all_zero) return std::nullopt;  // registered, but in no cluster
  return domain + "." + std::to_string(info.clique_id);
}

std::optional<Nvml::RemappedRows> Nvml::RowRemapping(Device device) const {
  unsigned int corrected = 0, uncorrected = 0, pending = 0, failed = 0;
  if (remapped_rows_ == nullptr ||
      remapped_rows_(device, &corrected, &uncorrected, &pending, &failed) != 0) {
    return std::nullopt;
  }
  return RemappedRows{pending != 0, failed != 0};
}

bool Nvml::WatchXids(Device device) {
  constexpr unsigned long long kXidCriticalError = 0x8;  // nvmlEventTypeXidCriticalError
  if (!ready_ || event_set_create_ == nullptr || register_events_ == nullptr ||
      event_wait_ == nullptr) {
    return false;
  }
  if (event_set_ == nullptr && event_set_create_(&event_set_) != 0) {
    event_set_ = nullptr;
    return false;
  }
  return register_events_(device, kXidCriticalError, event_set_) == 0;
}

std::vector<std::pair<Nvml::Device, unsigned long long>> Nvml::TakeXids() {
  std::vector<std::pair<Device, unsigned long long>> xids;
  if (event_set_ == nullptr) return xids;
  // Every event waiting now (a wait of 0 ms returns NVML_ERROR_TIMEOUT once none is left);
  // bounded, should a driver keep answering.
  for (int i = 0; i < 1000; ++i) {
    EventData data{};
    if (event_wait_(event_set_, &data, 0) != 0) break;
    xids.emplace_back(data.device, data.event_data);
  }
  return xids;
}

std::optional<std::vector<GpuProcess>> Nvml::ComputeProcesses(Device device) const {
  if (processes_ == nullptr) return std::nullopt;
  // Asked with room for 64; NVML says how many there are when that is too few.
  for (unsigned int room = 64; room <= 65536; room *= 4) {
    std::vector<ProcessInfo> infos(room);
    unsigned int count = room;
    const int status = processes_(device, &count, infos.data());
    if (status == kNvmlInsufficientSize) continue;
    if (status != 0) return std::nullopt;
    std::vector<GpuProcess> out;
    for (unsigned int i = 0; i < count && i < room; ++i) {
      out.push_back({static_cast<pid_t>(infos[i].pid), infos[i].used_gpu_memory});
    }
    return out;
  }
  return std::nullopt;
}

}  // namespace mxrun
