#pragma once
// Which physical GPU each worker of this node drives, as a PCI bus id, for --numa-binding: the
// worker's entry of CUDA_VISIBLE_DEVICES (common/visible_devices.h: its local rank's entry, or
// its local rank when unset) resolved through NVML, loaded with dlopen as launcher/nproc.cc does:
// indices, GPU-<uuid> (also a unique prefix, as CUDA accepts) and MIG-<uuid> / MIG-GPU-<uuid>/..
// (the MIG instance's parent GPU). Without NVML (no driver; a saved hwloc topology in tests) an
// index N is the topology's N-th NVIDIA GPU in PCI bus order. NVML numbers GPUs in bus order, as
// CUDA does with CUDA_DEVICE_ORDER=PCI_BUS_ID and, for GPUs of one model, by default.

#include <string>
#include <vector>

#include "agent/node/numa_topology.h"
#include "common/env_contract.h"

namespace mxrun {

// The bus id of each local rank's GPU ("" when it has none or it cannot be resolved).
std::vector<std::string> WorkerGpuBusIds(const EnvMap& agent_env, int local_world_size,
                                         const NumaTopology& topology);

// The NVLink domain of this node's GPUs (Nvml::FabricDomain of local rank 0's GPU: the GPUs of
// one node share it), "" without NVML, a GPU or a fabric. For the rank order
// (rendezvous/node_topology.h).
std::string NvlinkDomainOf(const EnvMap& agent_env);

}  // namespace mxrun
