#pragma once
// Resolving --nproc_per_node: an integer, or 'gpu' (visible NVIDIA GPUs), 'cpu' (online cores) or
// 'auto' (GPUs if any, else cores), as torchrun does. GPUs are counted without linking CUDA:
// CUDA_VISIBLE_DEVICES when set, otherwise NVML loaded with dlopen.

#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "common/env_contract.h"

namespace mxrun {

// Devices listed in CUDA_VISIBLE_DEVICES, counted as CUDA does: entries up to the first invalid
// one ("-1", garbage); "" means none.
int CountVisibleDevices(const std::string& cuda_visible_devices);

// GPUs the NVIDIA driver reports (0 when the driver or NVML is absent).
int CountNvmlDevices();

struct DeviceCounter {
  std::function<int()> nvml_devices = CountNvmlDevices;
  std::function<int()> cpu_cores;  // default: online processors
};

// Errors: InvalidArgument for 'gpu' with no GPU visible.
absl::StatusOr<int> ResolveNprocPerNode(const std::string& text, const EnvMap& env,
                                        const DeviceCounter& counter = {});

}  // namespace mxrun
