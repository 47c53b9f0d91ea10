#include "rendezvous/node_topology.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "rendezvous/wire/validation.h"

namespace mxrun {

absl::StatusOr<std::map<std::string, std::string>> ParseTopologyFile(std::string_view text,
                                                                     const std::string& path) {
  std::map<std::string, std::string> groups;
  int number = 0;
  for (absl::string_view line : absl::StrSplit(absl::string_view(text.data(), text.size()), '\n')) {
    ++number;
    if (const size_t hash = line.find('#'); hash != absl::string_view::npos)
      line = line.substr(0, hash);
    std::vector<absl::string_view> words =
        absl::StrSplit(line, absl::ByAnyChar(" \t\r"), absl::SkipEmpty());
    if (words.empty()) continue;
    auto bad = [&](absl::string_view why) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ":", number, ": ", why,
                       "; accepted: one 'HOST GROUP' per line (GROUP such as "
                       "spine0/leaf3, widest first), '#' comments"));
    };
    if (words.size() != 2) return bad(absl::StrCat(words.size(), " words"));
    if (absl::Status valid = ValidateTopology(words[1]); !valid.ok()) return bad(valid.message());
    if (!groups.emplace(std::string(words[0]), std::string(words[1])).second) {
      return bad(absl::StrCat("host '", words[0], "' is named twice"));
    }
  }
  return groups;
}

std::string SlurmTopologyGroup(const std::string& addr, const std::string& pattern) {
  std::vector<std::string> parts = absl::StrSplit(addr, '.', absl::SkipEmpty());
  std::vector<std::string> kinds = absl::StrSplit(pattern, '.', absl::SkipEmpty());
  std::vector<std::string> switches;
  if (kinds.size() == parts.size()) {
    for (size_t i = 0; i < parts.size(); ++i) {
      if (kinds[i] != "node") switches.push_back(parts[i]);
    }
  } else if (!parts.empty()) {
    parts.pop_back();  // no usable pattern (a dotted node name?): the last part is the node
    switches = parts;
  }
  return absl::StrJoin(switches, "/");
}

absl::StatusOr<std::string> ResolveNodeTopology(const RankOrderSettings& settings,
                                                const std::string& host,
                                                const std::string& nvlink_domain) {
  if (settings.mode == RankOrderMode::kHost) return std::string();
  std::string group = settings.group;
  if (group.empty() && !settings.file_groups.empty()) {
    auto it = settings.file_groups.find(host);
    if (it == settings.file_groups.end()) {  // the short name, as Slurm and hostfiles write it
      it = settings.file_groups.find(host.substr(0, host.find('.')));
    }
    if (it != settings.file_groups.end()) group = it->second;
  }
  std::string path = group;
  if (!nvlink_domain.empty()) path = group.empty() ? nvlink_domain : group + "/" + nvlink_domain;
  if (path.empty() && settings.mode == RankOrderMode::kTopology) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--rank_order=topology: nothing says where this node (", host, ") sits in the network",
        settings.file_groups.empty() ? ""
                                     : absl::StrCat(", and ", settings.file, " does not name it"),
        "; give --topology_group (or MXRUN_TOPOLOGY_GROUP), a --topology_file naming it, or run "
        "under Slurm with TopologyPlugin=topology/tree; no NVLink domain was found either (NVML). "
        "--rank_order=auto runs in host order instead"));
  }
  if (absl::Status valid = ValidateTopology(path); !valid.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("this node's place in the network: ", valid.message()));
  }
  return path;
}

}  // namespace mxrun
