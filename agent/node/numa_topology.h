#pragma once
// The machine's CPUs and NVIDIA GPUs as --numa-binding needs them, read with hwloc (the topology
// library Slurm and Open MPI use) instead of parsing sysfs by hand: every PU with its core,
// package, NUMA node and highest shared cache, and NVIDIA GPUs with their PCI bus id and the NUMA
// nodes they are attached to. The launcher loads it only when --numa-binding is given.
//
// Speed: hwloc's PCI discovery costs ~6 ms of a ~7 ms launch here, so the machine is loaded
// without it (CPUs and caches: ~1.3 ms) and only the GPUs the workers drive are placed, each with
// hwloc's own helper for a device's CPUs (what hwloc/nvml.h's hwloc_nvml_get_device_cpuset does).
// A saved topology (hwloc's HWLOC_XMLFILE, or a file in tests) is loaded whole, PCI devices
// included, and lists every NVIDIA GPU in it.

#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace mxrun {

struct NumaTopology {
  struct Pu {
    int os_index = 0;      // the CPU number the kernel uses
    int core = 0;          // hwloc's logical index of its core (the PU's own when no cores)
    int package = 0;       // logical index of its package (0 when none)
    int numa_node = 0;     // OS index of its NUMA node
    int cache_group = -1;  // logical index of its highest shared cache (L3, else L2); -1: none
  };
  struct Gpu {
    std::string bus_id;        // "0000:18:00.0", lower case
    std::set<int> numa_nodes;  // OS indexes of the NUMA nodes it is local to (empty: unknown)
  };
  std::vector<Pu> pus;       // the PUs this process may use, by os_index
  std::vector<Gpu> gpus;     // NVIDIA GPUs (PCI vendor 10de, display class), by bus id
  std::set<int> numa_nodes;  // every NUMA node with CPUs
};

// This machine's CPUs, and the GPUs of `gpu_bus_ids` ("" entries skipped) with their NUMA nodes.
absl::StatusOr<NumaTopology> LoadMachineTopology(const std::vector<std::string>& gpu_bus_ids);
// The topology saved in an hwloc XML file (tests).
absl::StatusOr<NumaTopology> LoadTopologyFromXml(const std::string& path);

}  // namespace mxrun
