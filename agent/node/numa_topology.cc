#include "agent/node/numa_topology.h"

#include <hwloc.h>
#include <hwloc/linux.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>

#include "absl/strings/str_cat.h"

namespace mxrun {
namespace {

constexpr unsigned kNvidiaVendor = 0x10de;
constexpr unsigned kDisplayClass = 0x03;  // 0300 VGA, 0302 3D controller

struct TopologyDeleter {
  void operator()(hwloc_topology* topology) const { hwloc_topology_destroy(topology); }
};
using TopologyPtr = std::unique_ptr<hwloc_topology, TopologyDeleter>;

int LogicalIndexOfAncestor(hwloc_topology_t topology, hwloc_obj_type_t type, hwloc_obj_t pu) {
  hwloc_obj_t ancestor = hwloc_get_ancestor_obj_by_type(topology, type, pu);
  return ancestor == nullptr ? -1 : static_cast<int>(ancestor->logical_index);
}

// The NUMA nodes whose CPUs are all in `cpus`. Local to the whole machine means hwloc cannot
// place the device (a VM, firmware without the information) unless there is one node only.
std::set<int> NodesWithin(hwloc_topology_t topology, hwloc_const_cpuset_t cpus) {
  std::set<int> nodes;
  const int count = hwloc_get_nbobjs_by_type(topology, HWLOC_OBJ_NUMANODE);
  if (hwloc_bitmap_iszero(cpus) ||
      (count > 1 && hwloc_bitmap_isincluded(hwloc_topology_get_complete_cpuset(topology), cpus))) {
    return nodes;
  }
  for (int i = 0; i < count; ++i) {
    hwloc_obj_t node = hwloc_get_obj_by_type(topology, HWLOC_OBJ_NUMANODE, i);
    if (node->cpuset != nullptr && !hwloc_bitmap_iszero(node->cpuset) &&
        hwloc_bitmap_isincluded(node->cpuset, cpus)) {
      nodes.insert(static_cast<int>(node->os_index));
    }
  }
  return nodes;
}

NumaTopology Extract(hwloc_topology_t topology) {
  NumaTopology out;
  // The highest cache level that exists: L3, else L2.
  hwloc_obj_type_t cache_type = HWLOC_OBJ_L3CACHE;
  if (hwloc_get_nbobjs_by_type(topology, HWLOC_OBJ_L3CACHE) == 0) cache_type = HWLOC_OBJ_L2CACHE;
  const bool has_cache = hwloc_get_nbobjs_by_type(topology, cache_type) > 0;

  hwloc_const_cpuset_t allowed = hwloc_topology_get_allowed_cpuset(topology);
  const int numa_count = hwloc_get_nbobjs_by_type(topology, HWLOC_OBJ_NUMANODE);
  for (hwloc_obj_t pu = hwloc_get_next_obj_by_type(topology, HWLOC_OBJ_PU, nullptr); pu != nullptr;
       pu = hwloc_get_next_obj_by_type(topology, HWLOC_OBJ_PU, pu)) {
    if (!hwloc_bitmap_isset(allowed, pu->os_index)) continue;
    NumaTopology::Pu entry;
    entry.os_index = static_cast<int>(pu->os_index);
    const int core = LogicalIndexOfAncestor(topology, HWLOC_OBJ_CORE, pu);
    entry.core = core >= 0 ? core : 100000 + static_cast<int>(pu->logical_index);
    entry.package = std::max(0, LogicalIndexOfAncestor(topology, HWLOC_OBJ_PACKAGE, pu));
    entry.cache_group = has_cache ? LogicalIndexOfAncestor(topology, cache_type, pu) : -1;
    entry.numa_node = 0;
    for (int i = 0; i < numa_count; ++i) {
      hwloc_obj_t node = hwloc_get_obj_by_type(topology, HWLOC_OBJ_NUMANODE, i);
      if (node->cpuset != nullptr && hwloc_bitmap_isset(node->cpuset, pu->os_index)) {
        entry.numa_node = static_cast<int>(node->os_index);
        break;
      }
    }
    out.numa_nodes.insert(entry.numa_node);
    out.pus.push_back(entry);
  }
  std::sort(out.pus.begin(), out.pus.end(),
            [](const auto& a, const auto& b) { return a.os_index < b.os_index; });

  for (hwloc_obj_t pci = hwloc_get_next_pcidev(topology, nullptr); pci != nullptr;
       pci = hwloc_get_next_pcidev(topology, pci)) {
    const auto& attr = pci->attr->pcidev;
    if (attr.vendor_id != kNvidiaVendor || (attr.class_id >> 8) != kDisplayClass) continue;
    NumaTopology::Gpu gpu;
    char bus_id[32];
    std::snprintf(bus_id, sizeof bus_id, "%04x:%02x:%02x.%01x", attr.domain, attr.bus, attr.dev,
                  attr.func);
    gpu.bus_id = bus_id;
    // Its locality: the NUMA nodes of the first normal object above it. Attached to the whole
    // machine means hwloc does not know (a VM, firmware without the information).
    hwloc_obj_t parent = hwloc_get_non_io_ancestor_obj(topology, pci);
    if (parent != nullptr && parent->cpuset != nullptr) {
      gpu.numa_nodes = NodesWithin(topology, parent->cpuset);
    }
    out.gpus.push_back(std::move(gpu));
  }
  std::sort(out.gpus.begin(), out.gpus.end(),
            [](const auto& a, const auto& b) { return a.bus_id < b.bus_id; });
  return out;
}

absl::StatusOr<TopologyPtr> Load(const std::string* xml_path, bool with_pci) {
  hwloc_topology_t raw = nullptr;
  if (hwloc_topology_init(&raw) != 0) return absl::InternalError("hwloc: cannot initialise");
  TopologyPtr topology(raw);
  // PCI devices are not discovered unless asked for; then only the important ones.
  if (with_pci) hwloc_topology_set_io_types_filter(raw, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
  // Only what the choice uses, which halves the load: L2/L3 of the caches, and Linux's sysfs
  // without the x86 backend's CPUID pass (it adds nothing a binding needs).
  hwloc_topology_set_cache_types_filter(raw, HWLOC_TYPE_FILTER_KEEP_NONE);
  hwloc_topology_set_type_filter(raw, HWLOC_OBJ_L2CACHE, HWLOC_TYPE_FILTER_KEEP_ALL);
  hwloc_topology_set_type_filter(raw, HWLOC_OBJ_L3CACHE, HWLOC_TYPE_FILTER_KEEP_ALL);
  if (xml_path == nullptr) {
    hwloc_topology_set_components(raw, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST, "x86");
  }
  if (xml_path != nullptr && hwloc_topology_set_xml(raw, xml_path->c_str()) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("hwloc cannot read the topology file ", *xml_path));
  }
  if (hwloc_topology_load(raw) != 0) {
    return absl::InternalError(xml_path != nullptr
                                   ? absl::StrCat("hwloc cannot load the topology file ", *xml_path)
                                   : "hwloc cannot load this machine's topology");
  }
  return topology;
}

}  // namespace

absl::StatusOr<NumaTopology> LoadMachineTopology(const std::vector<std::string>& gpu_bus_ids) {
  if (const char* saved = std::getenv("HWLOC_XMLFILE"); saved != nullptr && *saved != '\0') {
    return LoadTopologyFromXml(saved);  // as every hwloc tool does, and with its PCI devices
  }
  absl::StatusOr<TopologyPtr> topology = Load(nullptr, /*with_pci=*/false);
  if (!topology.ok()) return topology.status();
  NumaTopology out = Extract(topology->get());
  hwloc_bitmap_t cpus = hwloc_bitmap_alloc();
  for (const std::string& bus_id : std::set<std::string>(gpu_bus_ids.begin(), gpu_bus_ids.end())) {
    if (bus_id.empty()) continue;
    NumaTopology::Gpu gpu;
    gpu.bus_id = bus_id;
    hwloc_bitmap_zero(cpus);
    const std::string path = absl::StrCat("/sys/bus/pci/devices/", bus_id, "/local_cpus");
    if (hwloc_linux_read_path_as_cpumask(path.c_str(), cpus) == 0) {
      gpu.numa_nodes = NodesWithin(topology->get(), cpus);
    }
    out.gpus.push_back(std::move(gpu));
  }
  hwloc_bitmap_free(cpus);
  return out;
}

absl::StatusOr<NumaTopology> LoadTopologyFromXml(const std::string& path) {
  absl::StatusOr<TopologyPtr> topology = Load(&path, /*with_pci=*/true);
  if (!topology.ok()) return topology.status();
  return Extract(topology->get());
}

}  // namespace mxrun
