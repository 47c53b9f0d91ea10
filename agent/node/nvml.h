#pragma once
// NVML (the NVIDIA driver's management library), loaded with dlopen so that mxrun needs neither
// the CUDA toolkit to build nor a driver to run: without libnvidia-ml.so.1, ready() is false and
// every GPU feature quietly does nothing. Only what mxrun uses: finding a device by a
// CUDA_VISIBLE_DEVICES entry, its PCI bus id (--numa-binding), its memory and the processes that
// hold it (agent/node/gpu_reclaim.h). The ABI is nvml.h's, declared here.

#include <sys/types.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace mxrun {

struct GpuProcess {
  pid_t pid = 0;
  unsigned long long used_bytes = 0;  // NVML may not know (then 0)
};

class Nvml {
 public:
  using Device = void*;
  Nvml();
  ~Nvml();
  Nvml(const Nvml&) = delete;
  Nvml& operator=(const Nvml&) = delete;
  bool ready() const { return ready_; }

  // A CUDA_VISIBLE_DEVICES entry: an index, GPU-<uuid> (or a unique prefix, as CUDA accepts),
  // MIG-<uuid>, MIG-GPU-<uuid>/<gi>/<ci>.
  std::optional<Device> Find(const std::string& entry) const;
  // How many GPUs the driver lists; nullopt when it does not say.
  std::optional<unsigned int> DeviceCount() const;
  // "0000:03:00.0" of the device (a MIG instance: of its GPU); "" when unknown.
  std::string BusIdOf(const std::string& entry) const;
  std::optional<unsigned long long> UsedBytes(Device device) const;
  std::optional<unsigned long long> FreeBytes(Device device) const;
  // Memory pages retired (ECC) and waiting for a driver reload to take effect: true/false;
  // nullopt when the GPU does not say (not supported).
  std::optional<bool> RetiredPagesPending(Device device) const;
  // Row remapping (A100 and later): a remap pending a reset, or a remap that failed.
  struct RemappedRows {
    bool pending = false;
    bool failed = false;
  };
  std::optional<RemappedRows> RowRemapping(Device device) const;
  // The NVLink domain the GPU belongs to (multi-node NVLink, e.g. GB200 NVL72): its fabric's
  // cluster UUID and clique, "nvl:<32 hex digits>.<clique>", once the fabric manager has
  // registered it; nullopt where there is none (no NVSwitch fabric, an older driver).
  std::optional<std::string> FabricDomain(Device device) const;
  // XID errors (NVML's "critical error" events): WatchXids registers `device` for them, from now
  // on; TakeXids returns the XIDs reported since the last call (for every watched device:
  // device, XID), without waiting. False / empty where the driver does not support events.
  bool WatchXids(Device device);
  std::vector<std::pair<Device, unsigned long long>> TakeXids();
  std::optional<std::vector<GpuProcess>> ComputeProcesses(Device device) const;

 private:
  template <typename Fn>
  Fn Load(const char* name);

  struct Memory {
    unsigned long long total;
    unsigned long long free;
    unsigned long long used;
  };
  struct ProcessInfo {  // nvmlProcessInfo_v2_t, what the _v3 call fills
    unsigned int pid;
    unsigned long long used_gpu_memory;
    unsigned int gpu_instance_id;
    unsigned int compute_instance_id;
  };
  struct PciInfo {
    char bus_id_legacy[16];
    unsigned int domain;
    unsigned int bus;
    unsigned int device;
    unsigned int pci_device_id;
    unsigned int pci_sub_system_id;
    char bus_id[32];
  };

  void* library_ = nullptr;
  bool ready_ = false;
  int (*init_)() = nullptr;
  int (*shutdown_)() = nullptr;
  int (*count_)(unsigned int*) = nullptr;
  int (*by_index_)(unsigned int, Device*) = nullptr;
  int (*by_uuid_)(const char*, Device*) = nullptr;
  int (*uuid_)(Device, char*, unsigned int) = nullptr;
  int (*pci_)(Device, PciInfo*) = nullptr;
  int (*is_mig_)(Device, unsigned int*) = nullptr;
  int (*parent_)(Device, Device*) = nullptr;
  int (*memory_)(Device, Memory*) = nullptr;
  int (*processes_)(Device, unsigned int*, ProcessInfo*) = nullptr;
  int (*retired_pending_)(Device, int*) = nullptr;
  int (*remapped_rows_)(Device, unsigned int*, unsigned int*, unsigned int*,
                        unsigned int*) = nullptr;
  struct FabricInfo {  // nvml.h's nvmlGpuFabricInfo_t (v1)
    unsigned char cluster_uuid[16];
    int status;  // nvmlReturn_t
    unsigned int clique_id;
    unsigned char state;  // nvmlGpuFabricState_t: 3 is NVML_GPU_FABRIC_STATE_COMPLETED
  };
  int (*fabric_info_)(Device, FabricInfo*) = nullptr;
  struct EventData {  // nvmlEventData_t
    Device device;
    unsigned long long event_type;
    unsigned long long event_data;
    unsigned int gpu_instance_id;
    unsigned int compute_instance_id;
  };
  int (*event_set_create_)(void**) = nullptr;
  int (*event_set_free_)(void*) = nullptr;
  int (*register_events_)(Device, unsigned long long, void*) = nullptr;
  int (*event_wait_)(void*, EventData*, unsigned int) = nullptr;
  void* event_set_ = nullptr;
};

}  // namespace mxrun
