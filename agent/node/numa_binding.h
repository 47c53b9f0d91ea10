#pragma once
// --numa-binding: which CPUs, and which memory node, each worker of this node gets, chosen from
// the GPU it really drives. A pure function of (topology, the workers' GPUs, mode); the agent
// applies the result in the child before exec (process_launcher.h), so every thread and every
// data-loader process the worker starts inherits it.
//
// The modes are torchrun 2.x's (torch/numa/binding.py):
//   node          the CPUs of the GPU's NUMA node(s);
//   socket        the CPUs of the package(s) holding those nodes;
//   exclusive     the GPU's NUMA node's physical cores split into contiguous slices, one per GPU
//                 of this job on that node (ordered by PCI bus id; the first slices get one core
//                 more when they do not divide evenly), hyperthreads kept with their core;
//   core-complex  one highest-level cache group (an L3, a CCX on AMD) of the GPU's node: the
//                 largest first, GPUs of the node taking them in turn.
// Where mxrun differs from torchrun, and why:
//   - the GPU is the worker's real device (its CUDA_VISIBLE_DEVICES entry, resolved to a PCI bus
//     id), not "local rank N drives GPU N", so a list like CUDA_VISIBLE_DEVICES=4,5,6,7 or UUIDs
//     bind to the right node;
//   - exclusive and core-complex share out the node among the GPUs this job uses there, not every
//     GPU the node has, so a job on half the GPUs gets all the node's cores;
//   - the memory policy prefers the GPU's node (MPOL_PREFERRED: memory goes there first and
//     elsewhere when it is full, never an out-of-memory kill); torchrun sets CPU affinity only;
//   - nothing here fails a job: a worker with no GPU, a GPU whose locality is unknown, a
//     node with fewer cores than GPUs (exclusive: shared instead) are said in one line and left
//     as they are (torchrun raises).

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "agent/node/numa_topology.h"

namespace mxrun {

enum class NumaMode { kNode, kSocket, kExclusive, kCoreComplex };

// "node", "socket", "exclusive", "core-complex"; nullopt otherwise.
std::optional<NumaMode> ParseNumaMode(std::string_view text);
std::string NumaModeName(NumaMode mode);

struct WorkerBinding {
  std::vector<int> cpus;  // CPU numbers, ascending; empty: not bound
  int memory_node = -1;   // preferred NUMA node for its memory; -1: none
};

struct NumaPlan {
  std::vector<WorkerBinding> workers;  // by local rank
  std::string summary;                 // one line: what was bound, or why nothing was
};

// Where the agent itself may run and allocate (its affinity and Mems_allowed): every choice is
// narrowed to these; empty: no restriction.
struct AllowedResources {
  std::vector<int> cpus;
  std::vector<int> memory_nodes;
};

// `worker_gpus[local_rank]` is the PCI bus id of that worker's GPU ("" when it has none or it
// could not be found).
NumaPlan PlanNumaBinding(const NumaTopology& topology, const std::vector<std::string>& worker_gpus,
                         NumaMode mode, const AllowedResources& allowed = {});

// The kernel's list format, "0-3,8,10-11", both ways (a malformed list parses as empty).
std::string CpuListText(const std::vector<int>& cpus);
std::vector<int> ParseCpuList(std::string_view text);

}  // namespace mxrun
