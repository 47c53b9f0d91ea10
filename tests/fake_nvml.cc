// A stand-in for the NVIDIA driver's NVML (libnvidia-ml.so.1) for tests on machines without a GPU:
// built as a shared library of that name and found through LD_LIBRARY_PATH, it answers the calls
// mxrun makes (launcher/nproc.cc, agent/gpu_devices.cc) from FAKE_NVML_DEVICES:
//   FAKE_NVML_DEVICES="GPU-<uuid>@<pci bus id>[+MIG-<uuid>],..."   in NVML's index order
// e.g. "GPU-aaaa@0000:00:03.0,GPU-bbbb@0000:00:02.0+MIG-cccc". Return codes are NVML's
// (0 success, 2 invalid argument, 6 not found). Only what mxrun uses is here.

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
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
      std::string item = all.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
      start = comma == std::string::npos ? all.size() : comma + 1;
      Device d;
      const size_t at = item.find('@');
      const size_t plus = item.find('+');
      d.uuid = item.substr(0, at);
      std::string bus = item.substr(at + 1, plus == std::string::npos ? std::string::npos : plus - at - 1);
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

}  // extern "C"
