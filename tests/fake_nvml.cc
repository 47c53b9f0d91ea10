// A stand-in for the NVIDIA driver's NVML (libnvidia-ml.so.1) for tests on machines without a GPU:
// built as a shared library of that name and found through LD_LIBRARY_PATH, it answers the calls
// mxrun makes (launcher/nproc.cc, agent/node/gpu_devices.cc) from FAKE_NVML_DEVICES:
//   FAKE_NVML_DEVICES="GPU-<uuid>@<pci bus id>[+MIG-<uuid>],..."   in NVML's index order
// e.g. "GPU-aaaa@0000:00:03.0,GPU-bbbb@0000:00:02.0+MIG-cccc". Return codes are NVML's
// (0 success, 2 invalid argument, 6 not found, 7 insufficient size). Only what mxrun uses is here.
// Memory and processes come from the file FAKE_NVML_STATE names, read again at every call so
// that a test can change them while mxrun polls; one line per GPU:
//   <uuid> used_mib=<N> pids=<pid>[:<MiB>],... [retired_pending=1] [remap_pending=1]
//          [remap_failed=1] [xids=<xid>,...]        (a GPU not listed: 0 used, no process)
// The GPU fabric (an NVLink domain, nvmlDeviceGetGpuFabricInfo): `fabric=<32 hex digits>.<clique>`
// on a GPU's line (registration complete); without it the call says not supported (3).
// XID events: a device registered for them reports, in order, the XIDs of its `xids=` list added
// after its registration, one per nvmlEventSetWait_v2 (then 10, NVML_ERROR_TIMEOUT).

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

namespace {

struct Device {
  std::string uuid;
  unsigned domain = 0, bus = 0, dev = 0;
  std::string mig_uuid;  // one MIG instance, or empty
};

// Handles: index + 1 for a GPU, 1000 + index + 1 for its MIG instance.
std::vector<Device>& Devices() {
  static std::vector<Device> devices = [] {
    std::vector<Device> out;
    const char* text = std::getenv("FAKE_NVML_DEVICES");
    std::string all = text == nullptr ? "" : text;
    size_t start = 0;
    while (start < all.size()) {
      size_t comma = all.find(',', start);
      std::string item =
          all.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
      start = comma == std::string::npos ? all.size() : comma + 1;
      Device d;
      const size_t at = item.find('@');
      const size_t plus = item.find('+');
      d.uuid = item.substr(0, at);
      std::string bus =
          item.substr(at + 1, plus == std::string::npos ? std::string::npos : plus - at - 1);
      std::sscanf(bus.c_str(), "%x:%x:%x", &d.domain, &d.bus, &d.dev);
      if (plus != std::string::npos) d.mig_uuid = item.substr(plus + 1);
      out.push_back(d);
    }
    return out;
  }();
  return devices;
}

struct PciInfo {
  char bus_id_legacy[16];
  unsigned int domain, bus, device, pci_device_id, pci_sub_system_id;
  char bus_id[32];
};

long HandleValue(void* handle) { return reinterpret_cast<long>(handle); }

struct Usage {
  bool retired_pending = false, remap_pending = false, remap_failed = false;
  std::string fabric;  // "<32 hex>.<clique>", or empty
  std::vector<unsigned long long> xids;
  unsigned long long used = 0;
  std::vector<std::pair<unsigned, unsigned long long>> processes;  // pid, bytes
};

// The line of FAKE_NVML_STATE for GPU `uuid`, read now.
Usage UsageOf(const std::string& uuid) {
  Usage usage;
  const char* path = std::getenv("FAKE_NVML_STATE");
  if (path == nullptr) return usage;
  FILE* f = std::fopen(path, "r");
  if (f == nullptr) return usage;
  char line[4096];
  while (std::fgets(line, sizeof line, f) != nullptr) {
    std::string text = line;
    if (text.compare(0, uuid.size() + 1, uuid + " ") != 0) continue;
    usage.retired_pending = text.find("retired_pending=1") != std::string::npos;
    usage.remap_pending = text.find("remap_pending=1") != std::string::npos;
    usage.remap_failed = text.find("remap_failed=1") != std::string::npos;
    if (const size_t fabric = text.find("fabric="); fabric != std::string::npos) {
      usage.fabric = text.substr(fabric + 7, text.find_first_of(" \n", fabric + 7) - fabric - 7);
    }
    if (const size_t xids = text.find("xids="); xids != std::string::npos) {
      const char* at = text.c_str() + xids + 5;
      while (*at >= '0' && *at <= '9') {
        char* end = nullptr;
        usage.xids.push_back(std::strtoull(at, &end, 10));
        at = end;
        if (*at == ',') ++at;
      }
    }
    const size_t used = text.find("used_mib=");
    if (used != std::string::npos)
      usage.used = std::strtoull(text.c_str() + used + 9, nullptr, 10) << 20;
    const size_t pids = text.find("pids=");
    if (pids != std::string::npos) {
      std::string list = text.substr(pids + 5);
      size_t at = 0;
      while (at < list.size() && list[at] >= '0' && list[at] <= '9') {
        char* end = nullptr;
        const unsigned pid = static_cast<unsigned>(std::strtoul(list.c_str() + at, &end, 10));
        unsigned long long bytes = 0;
        at = static_cast<size_t>(end - list.c_str());
        if (at < list.size() && list[at] == ':') {
          bytes = std::strtoull(list.c_str() + at + 1, &end, 10) << 20;
          at = static_cast<size_t>(end - list.c_str());
        }
        usage.processes.emplace_back(pid, bytes);
        if (at < list.size() && list[at] == ',') ++at;
      }
    }
  }
  std::fclose(f);
  return usage;
}

struct Memory {
  unsigned long long total, free, used;
};
struct EventData {
  void* device;
  unsigned long long event_type, event_data;
  unsigned int gpu_instance_id, compute_instance_id;
};
// Per registered device (handle value): how many of its XIDs were delivered (or predate it).
std::vector<std::pair<long, size_t>>& Registered() {
  static std::vector<std::pair<long, size_t>> registered;
  return registered;
}
struct ProcessInfo {
  unsigned int pid;
  unsigned long long used_gpu_memory;
  unsigned int gpu_instance_id, compute_instance_id;
};

}  // namespace

extern "C" {

int nvmlInit_v2() { return 0; }
int nvmlShutdown() { return 0; }

int nvmlDeviceGetCount_v2(unsigned int* count) {
  *count = static_cast<unsigned int>(Devices().size());
  return 0;
}

int nvmlDeviceGetHandleByIndex_v2(unsigned int index, void** handle) {
  if (index >= Devices().size()) return 2;
  *handle = reinterpret_cast<void*>(static_cast<long>(index) + 1);
  return 0;
}

int nvmlDeviceGetHandleByUUID(const char* uuid, void** handle) {
  for (size_t i = 0; i < Devices().size(); ++i) {
    if (Devices()[i].uuid == uuid) {
      *handle = reinterpret_cast<void*>(static_cast<long>(i) + 1);
      return 0;
    }
    if (!Devices()[i].mig_uuid.empty() && Devices()[i].mig_uuid == uuid) {
      *handle = reinterpret_cast<void*>(1000 + static_cast<long>(i) + 1);
      return 0;
    }
  }
  return 6;
}

int nvmlDeviceGetUUID(void* handle, char* uuid, unsigned int length) {
  const long value = HandleValue(handle);
  if (value < 1 || value > static_cast<long>(Devices().size())) return 2;
  std::snprintf(uuid, length, "%s", Devices()[value - 1].uuid.c_str());
  return 0;
}

int nvmlDeviceIsMigDeviceHandle(void* handle, unsigned int* is_mig) {
  *is_mig = HandleValue(handle) > 1000 ? 1 : 0;
  return 0;
}

int nvmlDeviceGetDeviceHandleFromMigDeviceHandle(void* mig, void** device) {
  if (HandleValue(mig) <= 1000) return 2;
  *device = reinterpret_cast<void*>(HandleValue(mig) - 1000);
  return 0;
}

int nvmlDeviceGetPciInfo_v3(void* handle, PciInfo* info) {
  const long value = HandleValue(handle);
  if (value < 1 || value > static_cast<long>(Devices().size())) return 2;  // not for a MIG handle
  const Device& d = Devices()[value - 1];
  std::memset(info, 0, sizeof *info);
  info->domain = d.domain;
  info->bus = d.bus;
  info->device = d.dev;
  std::snprintf(info->bus_id, sizeof info->bus_id, "%08x:%02x:%02x.0", d.domain, d.bus, d.dev);
  return 0;
}

int nvmlDeviceGetMemoryInfo(void* handle, Memory* memory) {
  const long value = HandleValue(handle);
  if (value < 1 || value > static_cast<long>(Devices().size())) return 2;
  const Usage usage = UsageOf(Devices()[value - 1].uuid);
  memory->total = 80ull << 30;
  memory->used = usage.used;
  memory->free = memory->total > usage.used ? memory->total - usage.used : 0;
  return 0;
}

int nvmlDeviceGetComputeRunningProcesses_v3(void* handle, unsigned int* count, ProcessInfo* infos) {
  const long value = HandleValue(handle);
  if (value < 1 || value > static_cast<long>(Devices().size())) return 2;
  const Usage usage = UsageOf(Devices()[value - 1].uuid);
  const unsigned int room = *count;
  *count = static_cast<unsigned int>(usage.processes.size());
  if (usage.processes.size() > room) return 7;
  for (size_t i = 0; i < usage.processes.size(); ++i) {
    infos[i] = {usage.processes[i].first, usage.processes[i].second, 0, 0};
  }
  return 0;
}

int nvmlDeviceGetRetiredPagesPendingStatus(void* handle, int* pending) {
  const long value = HandleValue(handle);
  if (value < 1 || value > static_cast<long>(Devices().size())) return 2;
  *pending = UsageOf(Devices()[value - 1].uuid).retired_pending ? 1 : 0;
  return 0;
}

// nvml.h's nvmlGpuFabricInfo_t (v1).
struct FabricInfo {
  unsigned char cluster_uuid[16];
  int status;
  unsigned int clique_id;
  unsigned char state;  // 3: NVML_GPU_FABRIC_STATE_COMPLETED
};

int nvmlDeviceGetGpuFabricInfo(void* handle, FabricInfo* info) {
  const long value = HandleValue(handle);
  if (value < 1 || value > static_cast<long>(Devices().size()) || info == nullptr) return 2;
  const std::string fabric = UsageOf(Devices()[value - 1].uuid).fabric;
  if (fabric.size() < 34 || fabric[32] != '.') return 3;
  for (int i = 0; i < 16; ++i) {
    info->cluster_uuid[i] =
        static_cast<unsigned char>(std::strtoul(fabric.substr(2 * i, 2).c_str(), nullptr, 16));
  }
  info->status = 0;
  info->clique_id = static_cast<unsigned int>(std::strtoul(fabric.c_str() + 33, nullptr, 10));
  info->state = 3;
  return 0;
}

int nvmlDeviceGetRemappedRows(void* handle, unsigned int* corrected, unsigned int* uncorrected,
                              unsigned int* pending, unsigned int* failed) {
  const long value = HandleValue(handle);
  if (value < 1 || value > static_cast<long>(Devices().size())) return 2;
  const Usage usage = UsageOf(Devices()[value - 1].uuid);
  *corrected = 0;
  *uncorrected = usage.remap_pending || usage.remap_failed ? 1 : 0;
  *pending = usage.remap_pending ? 1 : 0;
  *failed = usage.remap_failed ? 1 : 0;
  return 0;
}

int nvmlEventSetCreate(void** set) {
  static int token;
  *set = &token;
  return 0;
}

int nvmlEventSetFree(void*) { return 0; }

int nvmlDeviceRegisterEvents(void* handle, unsigned long long, void*) {
  const long value = HandleValue(handle);
  if (value < 1 || value > static_cast<long>(Devices().size())) return 2;
  Registered().emplace_back(value, UsageOf(Devices()[value - 1].uuid).xids.size());
  return 0;
}

int nvmlEventSetWait_v2(void*, EventData* data, unsigned int) {
  for (auto& [value, delivered] : Registered()) {
    const Usage usage = UsageOf(Devices()[value - 1].uuid);
    if (usage.xids.size() > delivered) {
      *data = {reinterpret_cast<void*>(value), 0x8, usage.xids[delivered], 0, 0};
      ++delivered;
      return 0;
    }
  }
  return 10;  // NVML_ERROR_TIMEOUT: nothing waiting
}

}  // extern "C"
