#pragma once
// The machine's CPUs and NVIDIA GPUs as --numa-binding needs them, read with hwloc (the topology
// library Slurm and Open MPI use) instead of parsing sysfs by hand: every PU with its core,
// package, NUMA node and highest shared cache, and every NVIDIA GPU with its PCI bus id and the
// NUMA nodes it is attached to. Loading it costs a few milliseconds, so the launcher does it only
// when --numa-binding is given. hwloc's own HWLOC_XMLFILE (a saved `lstopo file.xml`) replaces the
// machine, as in every hwloc tool.

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
    std::string bus_id;            // "0000:18:00.0", lower case
    std::set<int> numa_nodes;      // OS indexes of the NUMA nodes it is local to (empty: unknown)
  };
  std::vector<Pu> pus;              // the PUs this process may use, by os_index
  std::vector<Gpu> gpus;            // NVIDIA GPUs (PCI vendor 10de, display class), by bus id
  std::set<int> numa_nodes;         // every NUMA node with CPUs
};

// The topology hwloc sees: the machine, or HWLOC_XMLFILE when set.
absl::StatusOr<NumaTopology> LoadMachineTopology();
// The topology saved in an hwloc XML file (tests).
absl::StatusOr<NumaTopology> LoadTopologyFromXml(const std::string& path);

}  // namespace mxrun
