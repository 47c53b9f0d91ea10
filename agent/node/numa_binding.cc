#include "agent/node/numa_binding.h"

#include <algorithm>
#include <map>
#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace mxrun {
namespace {

using Pu = NumaTopology::Pu;

std::vector<int> CpusOf(const std::vector<Pu>& pus) {
  std::vector<int> cpus;
  for (const Pu& pu : pus) cpus.push_back(pu.os_index);
  std::sort(cpus.begin(), cpus.end());
  return cpus;
}

// PUs grouped by `key`, each group ascending, groups ordered by their first CPU.
template <typename Key>
std::vector<std::vector<Pu>> GroupBy(const std::vector<Pu>& pus, Key key) {
  std::map<int, std::vector<Pu>> groups;
  for (const Pu& pu : pus) groups[key(pu)].push_back(pu);
  std::vector<std::vector<Pu>> out;
  for (auto& [unused, group] : groups) out.push_back(std::move(group));
  std::sort(out.begin(), out.end(),
            [](const auto& a, const auto& b) { return a.front().os_index < b.front().os_index; });
  return out;
}

// The CPUs of one worker; `note` says why the choice is not the mode's own (empty otherwise).
std::vector<Pu> Choose(NumaMode mode, const std::vector<Pu>& pus, const std::vector<Pu>& near,
                       int index, int peers, std::string& note) {
  switch (mode) {
    case NumaMode::kNode:
      return near;
    case NumaMode::kSocket: {
      std::set<int> packages;
      for (const Pu& pu : near) packages.insert(pu.package);
      std::vector<Pu> out;
      for (const Pu& pu : pus) {
        if (packages.count(pu.package) > 0) out.push_back(pu);
      }
      return out;
    }
    case NumaMode::kExclusive: {
      std::vector<std::vector<Pu>> cores = GroupBy(near, [](const Pu& pu) { return pu.core; });
      const int count = static_cast<int>(cores.size());
      if (count < peers) {
        note = absl::StrCat(" (shared: ", count, " cores for ", peers, " GPUs)");
        return near;
      }
      const int per = count / peers;
      const int extra = count % peers;
      const int start = index * per + std::min(index, extra);
      const int length = per + (index < extra ? 1 : 0);
      std::vector<Pu> out;
      for (int i = start; i < start + length; ++i)
        out.insert(out.end(), cores[i].begin(), cores[i].end());
      return out;
    }
    case NumaMode::kCoreComplex: {
      if (std::all_of(near.begin(), near.end(), [](const Pu& pu) { return pu.cache_group < 0; })) {
        note = " (no shared cache known: the whole node)";
        return near;
      }
      std::vector<std::vector<Pu>> groups =
          GroupBy(near, [](const Pu& pu) { return pu.cache_group; });
      std::stable_sort(groups.begin(), groups.end(),
                       [](const auto& a, const auto& b) { return a.size() > b.size(); });
      return groups[index % groups.size()];
    }
  }
  return near;
}

}  // namespace

std::optional<NumaMode> ParseNumaMode(std::string_view text) {
  if (text == "node") return NumaMode::kNode;
  if (text == "socket") return NumaMode::kSocket;
  if (text == "exclusive") return NumaMode::kExclusive;
  if (text == "core-complex") return NumaMode::kCoreComplex;
  return std::nullopt;
}

std::string NumaModeName(NumaMode mode) {
  switch (mode) {
    case NumaMode::kNode:
      return "node";
    case NumaMode::kSocket:
      return "socket";
    case NumaMode::kExclusive:
      return "exclusive";
    case NumaMode::kCoreComplex:
      return "core-complex";
  }
  return "?";
}

std::string CpuListText(const std::vector<int>& cpus) {
  std::string out;
  for (size_t i = 0; i < cpus.size();) {
    size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    absl::StrAppend(&out, out.empty() ? "" : ",", cpus[i]);
    if (j > i) absl::StrAppend(&out, "-", cpus[j]);
    i = j + 1;
  }
  return out;
}

std::vector<int> ParseCpuList(std::string_view text) {
  std::vector<int> cpus;
  for (absl::string_view item :
       absl::StrSplit(absl::string_view(text.data(), text.size()), ',', absl::SkipWhitespace())) {
    item = absl::StripAsciiWhitespace(item);
    std::pair<absl::string_view, absl::string_view> range = absl::StrSplit(item, '-');
    int first = 0;
    int last = 0;
    if (!absl::SimpleAtoi(range.first, &first)) return {};
    if (range.second.empty()) {
      last = first;
    } else if (!absl::SimpleAtoi(range.second, &last)) {
      return {};
    }
    if (first < 0 || last < first || last - first > 1 << 16) return {};
    for (int cpu = first; cpu <= last; ++cpu) cpus.push_back(cpu);
  }
  return cpus;
}

NumaPlan PlanNumaBinding(const NumaTopology& topology, const std::vector<std::string>& worker_gpus,
                         NumaMode mode, const AllowedResources& allowed_resources) {
  NumaPlan plan;
  plan.workers.resize(worker_gpus.size());
  const std::string head = absl::StrCat("numa binding (", NumaModeName(mode), "): ");
  const std::set<int> allowed(allowed_resources.cpus.begin(), allowed_resources.cpus.end());
  const std::set<int> memory_nodes(allowed_resources.memory_nodes.begin(),
                                   allowed_resources.memory_nodes.end());
  std::vector<Pu> pus;
  for (const Pu& pu : topology.pus) {
    if (allowed.empty() || allowed.count(pu.os_index) > 0) pus.push_back(pu);
  }
  std::map<std::string, const NumaTopology::Gpu*> gpus;
  for (const NumaTopology::Gpu& gpu : topology.gpus) gpus[gpu.bus_id] = &gpu;

  if (topology.numa_nodes.size() <= 1 && (mode == NumaMode::kNode || mode == NumaMode::kSocket)) {
    plan.summary = absl::StrCat(head, "one NUMA node (CPUs ", CpuListText(CpusOf(pus)),
                                "): nothing to choose, workers not bound");
    return plan;
  }
  if (std::all_of(worker_gpus.begin(), worker_gpus.end(),
                  [](const std::string& gpu) { return gpu.empty(); })) {
    plan.summary = absl::StrCat(head, "no GPU found for the workers (", topology.gpus.size(),
                                " NVIDIA GPU(s) in the topology): workers not bound");
    return plan;
  }

  std::vector<std::string> lines;
  for (size_t rank = 0; rank < worker_gpus.size(); ++rank) {
    const std::string& bus_id = worker_gpus[rank];
    const std::string who = absl::StrCat("local rank ", rank);
    auto found = gpus.find(bus_id);
    if (bus_id.empty() || found == gpus.end()) {
      lines.push_back(absl::StrCat(who, ": no GPU", bus_id.empty() ? "" : " ", bus_id,
                                   bus_id.empty() ? "" : " in the topology", ", not bound"));
      continue;
    }
    const NumaTopology::Gpu& gpu = *found->second;
    if (gpu.numa_nodes.empty()) {
      lines.push_back(
          absl::StrCat(who, " (GPU ", bus_id, "): its NUMA node is unknown, not bound"));
      continue;
    }
    std::vector<Pu> near;
    for (const Pu& pu : pus) {
      if (gpu.numa_nodes.count(pu.numa_node) > 0) near.push_back(pu);
    }
    if (near.empty()) {
      lines.push_back(
          absl::StrCat(who, " (GPU ", bus_id, "): no CPU it may use near it, not bound"));
      continue;
    }
    // This job's GPUs on the same node(s), by bus id: the slices of exclusive and core-complex.
    std::set<std::string> peers;
    for (const std::string& other : worker_gpus) {
      auto it = gpus.find(other);
      if (it != gpus.end() && it->second->numa_nodes == gpu.numa_nodes) peers.insert(other);
    }
    const int index = static_cast<int>(std::distance(peers.begin(), peers.find(bus_id)));
    std::string note;
    std::vector<Pu> chosen = Choose(mode, pus, near, index, static_cast<int>(peers.size()), note);
    WorkerBinding& binding = plan.workers[rank];
    binding.cpus = CpusOf(chosen);
    const int node = *gpu.numa_nodes.begin();
    if (memory_nodes.empty() || memory_nodes.count(node) > 0) binding.memory_node = node;
    lines.push_back(
        absl::StrCat(who, " (GPU ", bus_id, ") -> CPUs ", CpuListText(binding.cpus), note,
                     binding.memory_node >= 0
                         ? absl::StrCat(", memory node ", node)
                         : absl::StrCat(", memory anywhere (node ", node, " not allowed)")));
  }
  plan.summary = absl::StrCat(head, absl::StrJoin(lines, "; "));
  return plan;
}

}  // namespace mxrun
