#include "launcher/nproc.h"

#include <dlfcn.h>
#include <unistd.h>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace mxrun {

int CountVisibleDevices(const std::string& cuda_visible_devices) {
  int count = 0;
  for (absl::string_view item : absl::StrSplit(cuda_visible_devices, ',')) {
    item = absl::StripAsciiWhitespace(item);
    int index = -1;
    const bool uuid = absl::StartsWith(item, "GPU-") || absl::StartsWith(item, "MIG-");
    if (!uuid && !(absl::SimpleAtoi(item, &index) && index >= 0)) break;
    ++count;
  }
  return count;
}

int CountNvmlDevices() {
  void* nvml = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (nvml == nullptr) return 0;
  using InitFn = int (*)();
  using CountFn = int (*)(unsigned int*);
  auto init = reinterpret_cast<InitFn>(dlsym(nvml, "nvmlInit_v2"));
  auto count = reinterpret_cast<CountFn>(dlsym(nvml, "nvmlDeviceGetCount_v2"));
  auto shutdown = reinterpret_cast<InitFn>(dlsym(nvml, "nvmlShutdown"));
  unsigned int devices = 0;
  if (init != nullptr && count != nullptr && init() == 0) {
    if (count(&devices) != 0) devices = 0;
    if (shutdown != nullptr) shutdown();
  }
  dlclose(nvml);
  return static_cast<int>(devices);
}

absl::StatusOr<int> ResolveNprocPerNode(const std::string& text, const EnvMap& env,
                                        const DeviceCounter& counter) {
  int number = 0;
  if (absl::SimpleAtoi(text, &number)) return number;
  auto gpus = [&] {
    auto it = env.find("CUDA_VISIBLE_DEVICES");
    return it != env.end() ? CountVisibleDevices(it->second) : counter.nvml_devices();
  };
  auto cores = [&] {
    if (counter.cpu_cores) return counter.cpu_cores();
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    return online > 0 ? static_cast<int>(online) : 1;
  };
  if (text == "cpu") return cores();
  if (text == "gpu") {
    int n = gpus();
    if (n == 0) {
      return absl::InvalidArgumentError(
          "--nproc_per_node=gpu: no NVIDIA GPU is visible (CUDA_VISIBLE_DEVICES and the NVIDIA "
          "driver's NVML report none); use an integer, 'cpu' or 'auto' on a machine without GPUs");
    }
    return n;
  }
  if (text == "auto") {
    int n = gpus();
    return n > 0 ? n : cores();
  }
  return absl::InvalidArgumentError("--nproc_per_node='" + text +
                                    "' is not valid; accepted: an integer, gpu, cpu or auto");
}

}  // namespace mxrun
