// --numa-binding's choice of CPUs, on topologies hwloc loads from the XML files in
// tests/topologies/ (made by make_topologies.py): a two-socket eight-GPU server, one with two NUMA
// nodes per socket, and one with every GPU on one socket. Cores are numbered as on Intel servers:
// core c has CPUs c and c + (number of cores).

#include <catch2/catch.hpp>

#include <unistd.h>

#include "agent/node/gpu_devices.h"
#include "agent/node/numa_binding.h"
#include "agent/node/numa_topology.h"

using mxrun::CpuListText;
using mxrun::NumaMode;
using mxrun::NumaPlan;
using mxrun::NumaTopology;
using mxrun::PlanNumaBinding;

namespace {

NumaTopology Load(const std::string& name) {
  auto topology = mxrun::LoadTopologyFromXml(std::string(TOPOLOGIES_DIR) + "/" + name + ".xml");
  INFO(topology.status().ToString());
  REQUIRE(topology.ok());
  return *topology;
}

// The bus ids of the topology's first `count` GPUs, as workers 0..count-1 would drive them.
std::vector<std::string> FirstGpus(const NumaTopology& topology, size_t count) {
  std::vector<std::string> out;
  for (size_t i = 0; i < count; ++i) out.push_back(topology.gpus.at(i).bus_id);
  return out;
}

std::vector<std::string> Cpus(const NumaPlan& plan) {
  std::vector<std::string> out;
  for (const auto& worker : plan.workers) out.push_back(CpuListText(worker.cpus));
  return out;
}

std::vector<int> MemoryNodes(const NumaPlan& plan) {
  std::vector<int> out;
  for (const auto& worker : plan.workers) out.push_back(worker.memory_node);
  return out;
}

}  // namespace

TEST_CASE("hwloc reads the GPUs and their NUMA nodes from a saved topology", "[numa]") {
  NumaTopology t = Load("two_socket_8gpu");
  CHECK(t.pus.size() == 64);
  CHECK(t.numa_nodes == std::set<int>{0, 1});
  REQUIRE(t.gpus.size() == 8);  // the network card is not a GPU
  CHECK(t.gpus[0].bus_id == "0000:18:00.0");
  CHECK(t.gpus[0].numa_nodes == std::set<int>{0});
  CHECK(t.gpus[7].bus_id == "0000:db:00.0");
  CHECK(t.gpus[7].numa_nodes == std::set<int>{1});
  CHECK(t.pus[32].os_index == 32);
  CHECK(t.pus[32].core == t.pus[0].core);  // hyperthreads of one core
  CHECK_FALSE(mxrun::LoadTopologyFromXml("/nonexistent/topology.xml").ok());
}

TEST_CASE("node and socket on a two-socket eight-GPU server", "[numa]") {
  NumaTopology t = Load("two_socket_8gpu");
  NumaPlan node = PlanNumaBinding(t, FirstGpus(t, 8), NumaMode::kNode);
  CHECK(Cpus(node) == std::vector<std::string>{"0-15,32-47", "0-15,32-47", "0-15,32-47",
                                               "0-15,32-47", "16-31,48-63", "16-31,48-63",
                                               "16-31,48-63", "16-31,48-63"});
  CHECK(MemoryNodes(node) == std::vector<int>{0, 0, 0, 0, 1, 1, 1, 1});
  CHECK_THAT(node.summary, Catch::StartsWith("numa binding (node): local rank 0 (GPU "
                                             "0000:18:00.0) -> CPUs 0-15,32-47, memory node 0"));
  CHECK(Cpus(PlanNumaBinding(t, FirstGpus(t, 8), NumaMode::kSocket)) == Cpus(node));
}

TEST_CASE("exclusive splits each node's cores between the job's GPUs on it", "[numa]") {
  NumaTopology t = Load("two_socket_8gpu");
  NumaPlan all = PlanNumaBinding(t, FirstGpus(t, 8), NumaMode::kExclusive);
  CHECK(Cpus(all) == std::vector<std::string>{"0-3,32-35", "4-7,36-39", "8-11,40-43", "12-15,44-47",
                                              "16-19,48-51", "20-23,52-55", "24-27,56-59",
                                              "28-31,60-63"});
  // A job on two of the socket's four GPUs gets all of its cores (torchrun splits by every GPU).
  NumaPlan two = PlanNumaBinding(t, FirstGpus(t, 2), NumaMode::kExclusive);
  CHECK(Cpus(two) == std::vector<std::string>{"0-7,32-39", "8-15,40-47"});
  // The worker's real GPU decides, not its local rank: workers on GPUs 4 and 0, in that order.
  NumaPlan swapped = PlanNumaBinding(t, {t.gpus[4].bus_id, t.gpus[0].bus_id}, NumaMode::kExclusive);
  CHECK(Cpus(swapped) == std::vector<std::string>{"16-31,48-63", "0-15,32-47"});
  CHECK(MemoryNodes(swapped) == std::vector<int>{1, 0});
}

TEST_CASE("core-complex gives each GPU of a node one L3 group in turn", "[numa]") {
  NumaTopology t = Load("two_socket_8gpu");
  NumaPlan plan = PlanNumaBinding(t, FirstGpus(t, 8), NumaMode::kCoreComplex);
  CHECK(Cpus(plan) == std::vector<std::string>{"0-7,32-39", "8-15,40-47", "0-7,32-39", "8-15,40-47",
                                               "16-23,48-55", "24-31,56-63", "16-23,48-55",
                                               "24-31,56-63"});
}

TEST_CASE("several NUMA nodes per socket: node is the GPU's node, socket its package", "[numa]") {
  NumaTopology t = Load("snc_8gpu");
  CHECK(t.numa_nodes == std::set<int>{0, 1, 2, 3});
  REQUIRE(t.gpus.size() == 8);
  CHECK(t.gpus[2].numa_nodes == std::set<int>{1});
  const auto gpus = FirstGpus(t, 8);
  NumaPlan node = PlanNumaBinding(t, gpus, NumaMode::kNode);
  CHECK(Cpus(node)[0] == "0-7,32-39");
  CHECK(Cpus(node)[2] == "8-15,40-47");
  CHECK(Cpus(node)[7] == "24-31,56-63");
  CHECK(MemoryNodes(node) == std::vector<int>{0, 0, 1, 1, 2, 2, 3, 3});
  NumaPlan socket = PlanNumaBinding(t, gpus, NumaMode::kSocket);
  CHECK(Cpus(socket)[2] == "0-15,32-47");  // the package of node 1
  CHECK(Cpus(socket)[5] == "16-31,48-63");
  CHECK(MemoryNodes(socket)[2] == 1);  // memory still near the GPU
  NumaPlan exclusive = PlanNumaBinding(t, gpus, NumaMode::kExclusive);
  CHECK(Cpus(exclusive) == std::vector<std::string>{"0-3,32-35", "4-7,36-39", "8-11,40-43",
                                                    "12-15,44-47", "16-19,48-51", "20-23,52-55",
                                                    "24-27,56-59", "28-31,60-63"});
  // One L3 per package: within a node there is one group, which both of its GPUs share.
  NumaPlan complex = PlanNumaBinding(t, gpus, NumaMode::kCoreComplex);
  CHECK(Cpus(complex)[0] == "0-7,32-39");
  CHECK(Cpus(complex)[1] == "0-7,32-39");
}

TEST_CASE("every GPU on one socket: exclusive splits that node's cores", "[numa]") {
  NumaTopology t = Load("one_socket_4gpu");
  REQUIRE(t.gpus.size() == 4);
  for (const auto& gpu : t.gpus) CHECK(gpu.numa_nodes == std::set<int>{0});
  const auto gpus = FirstGpus(t, 4);
  CHECK(Cpus(PlanNumaBinding(t, gpus, NumaMode::kNode)) ==
        std::vector<std::string>(4, "0-7,16-23"));
  CHECK(Cpus(PlanNumaBinding(t, gpus, NumaMode::kSocket)) ==
        std::vector<std::string>(4, "0-7,16-23"));
  CHECK(Cpus(PlanNumaBinding(t, gpus, NumaMode::kExclusive)) ==
        std::vector<std::string>{"0-1,16-17", "2-3,18-19", "4-5,20-21", "6-7,22-23"});
  // Uneven: 8 cores for 3 GPUs, the first slices one core more.
  CHECK(Cpus(PlanNumaBinding(t, FirstGpus(t, 3), NumaMode::kExclusive)) ==
        std::vector<std::string>{"0-2,16-18", "3-5,19-21", "6-7,22-23"});
  CHECK(Cpus(PlanNumaBinding(t, gpus, NumaMode::kCoreComplex)) ==
        std::vector<std::string>{"0-3,16-19", "4-7,20-23", "0-3,16-19", "4-7,20-23"});
  CHECK(MemoryNodes(PlanNumaBinding(t, gpus, NumaMode::kExclusive)) ==
        std::vector<int>{0, 0, 0, 0});
}

TEST_CASE("what cannot be bound is said and left alone, never an error", "[numa]") {
  NumaTopology t = Load("one_socket_4gpu");
  // A worker without a GPU, and one whose GPU is not in the topology.
  NumaPlan plan = PlanNumaBinding(t, {t.gpus[0].bus_id, "", "0000:77:00.0"}, NumaMode::kNode);
  CHECK(Cpus(plan) == std::vector<std::string>{"0-7,16-23", "", ""});
  CHECK_THAT(plan.summary, Catch::Contains("local rank 1: no GPU, not bound"));
  CHECK_THAT(plan.summary, Catch::Contains("local rank 2: no GPU 0000:77:00.0 in the topology"));
  // No GPU at all.
  NumaPlan none = PlanNumaBinding(t, {"", ""}, NumaMode::kExclusive);
  CHECK(Cpus(none) == std::vector<std::string>{"", ""});
  CHECK_THAT(none.summary, Catch::Contains("no GPU found for the workers (4 NVIDIA GPU(s) in the "
                                           "topology): workers not bound"));
  // More GPUs than cores: exclusive shares the node instead of failing.
  NumaTopology small = Load("two_cpu_2gpu");
  NumaPlan shared =
      PlanNumaBinding(small, {small.gpus[0].bus_id, small.gpus[0].bus_id, small.gpus[1].bus_id},
                      NumaMode::kExclusive);
  CHECK(Cpus(shared) == std::vector<std::string>{"0", "0", "1"});
  // Narrowed to what the agent may use; a memory node it may not use is not asked for.
  NumaPlan narrowed = PlanNumaBinding(t, FirstGpus(t, 2), NumaMode::kNode, {{0, 1, 2, 30}, {1}});
  CHECK(Cpus(narrowed) == std::vector<std::string>{"0-2", "0-2"});
  CHECK(MemoryNodes(narrowed) == std::vector<int>{-1, -1});
  CHECK_THAT(narrowed.summary, Catch::Contains("memory anywhere (node 0 not allowed)"));
  NumaPlan outside = PlanNumaBinding(t, FirstGpus(t, 1), NumaMode::kNode, {{30, 31}, {}});
  CHECK(Cpus(outside) == std::vector<std::string>{""});
  CHECK_THAT(outside.summary, Catch::Contains("no CPU it may use near it"));
}

TEST_CASE("one NUMA node: node and socket have nothing to choose", "[numa]") {
  NumaTopology t;
  for (int cpu = 0; cpu < 4; ++cpu) t.pus.push_back({cpu, cpu, 0, 0, 0});
  t.numa_nodes = {0};
  t.gpus.push_back({"0000:18:00.0", {0}});
  t.gpus.push_back({"0000:2a:00.0", {0}});
  NumaPlan node = PlanNumaBinding(t, {"0000:18:00.0", "0000:2a:00.0"}, NumaMode::kNode);
  CHECK(Cpus(node) == std::vector<std::string>{"", ""});
  CHECK(node.summary ==
        "numa binding (node): one NUMA node (CPUs 0-3): nothing to choose, workers not bound");
  // exclusive still gives each GPU its own cores.
  CHECK(Cpus(PlanNumaBinding(t, {"0000:18:00.0", "0000:2a:00.0"}, NumaMode::kExclusive)) ==
        std::vector<std::string>{"0-1", "2-3"});
}

TEST_CASE("modes and CPU lists parse as torchrun and the kernel write them", "[numa]") {
  CHECK(mxrun::ParseNumaMode("core-complex") == NumaMode::kCoreComplex);
  CHECK(mxrun::ParseNumaMode("exclusive") == NumaMode::kExclusive);
  CHECK_FALSE(mxrun::ParseNumaMode("Node").has_value());
  CHECK(mxrun::ParseCpuList("0-2,5, 7-8") == std::vector<int>{0, 1, 2, 5, 7, 8});
  CHECK(mxrun::ParseCpuList("3-1").empty());
  CHECK(mxrun::ParseCpuList("x").empty());
  CHECK(CpuListText({0, 1, 2, 5, 7, 8}) == "0-2,5,7-8");
}

TEST_CASE("without NVML a worker's GPU index is the topology's GPU in bus order", "[numa]") {
  NumaTopology t = Load("two_socket_8gpu");
  const std::string xml = std::string(TOPOLOGIES_DIR) + "/two_socket_8gpu.xml";
  // HWLOC_XMLFILE: a saved topology, so this machine's NVML (if any) is not asked.
  CHECK(mxrun::WorkerGpuBusIds({{"HWLOC_XMLFILE", xml}}, 2, t) ==
        std::vector<std::string>{"0000:18:00.0", "0000:2a:00.0"});
  CHECK(mxrun::WorkerGpuBusIds({{"HWLOC_XMLFILE", xml}, {"CUDA_VISIBLE_DEVICES", "7, 4"}}, 2, t) ==
        std::vector<std::string>{"0000:db:00.0", "0000:9a:00.0"});
  // A UUID needs NVML; an index past the list or the machine's GPUs has no GPU.
  CHECK(mxrun::WorkerGpuBusIds({{"HWLOC_XMLFILE", xml}, {"CUDA_VISIBLE_DEVICES", "GPU-1234,9"}}, 3,
                               t) == std::vector<std::string>{"", "", ""});
}

TEST_CASE("this machine loads without PCI discovery and places a device through hwloc", "[numa]") {
  // Any PCI device of this machine stands in for a GPU: its locality comes from hwloc's helper
  // for a device's CPUs, as a GPU's would.
  std::string device;
  for (const char* candidate : {"0000:00:00.0", "0000:00:01.0", "0000:00:02.0", "0000:00:03.0"}) {
    if (access((std::string("/sys/bus/pci/devices/") + candidate + "/local_cpus").c_str(), R_OK) ==
        0) {
      device = candidate;
      break;
    }
  }
  auto topology = mxrun::LoadMachineTopology({device, ""});
  REQUIRE(topology.ok());
  CHECK_FALSE(topology->pus.empty());
  CHECK_FALSE(topology->numa_nodes.empty());
  if (device.empty()) {
    CHECK(topology->gpus.empty());
    return;
  }
  REQUIRE(topology->gpus.size() == 1);
  CHECK(topology->gpus[0].bus_id == device);
  if (topology->numa_nodes.size() == 1) {
    CHECK(topology->gpus[0].numa_nodes == topology->numa_nodes);  // the one node there is
  } else {
    CHECK(topology->gpus[0].numa_nodes.size() <= topology->numa_nodes.size());
  }
}
