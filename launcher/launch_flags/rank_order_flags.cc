// How node ranks follow the network (rendezvous/node_topology.h): --rank_order and where a node's
// group comes from. Slurm's topology address is implied as --topology_group (slurm.cc).

#include "common/files.h"
#include "launcher/launch_flags/groups.h"
#include "rendezvous/wire/validation.h"

namespace mxrun {

LaunchFlagGroup RankOrderFlags() {
  LaunchFlagGroup group;
  group.flags = {
      {"rank_order", "", false,
       "node ranks: auto (by the network where this node knows its place: a switch from "
       "--topology_group, Slurm's topology or --topology_file, an NVLink domain from NVML; else "
       "by host name), host (by host name only) or topology (refused without a place)",
       "auto"},
      {"topology_group", "", false,
       "this node's place in the network, widest group first (spine0/leaf3): nodes of one group "
       "get contiguous ranks (under Slurm: its topology address, with topology/tree)",
       ""},
      {"topology_file", "", false,
       "a file of 'HOST GROUP' lines saying where each node sits (for nodes without "
       "--topology_group)",
       ""},
  };
  group.apply = [](const FlagValues& v, LaunchOptions& o) -> absl::Status {
    const std::string mode = v.Lower("rank_order");
    if (mode == "auto") {
      o.rank_order.mode = RankOrderMode::kAuto;
    } else if (mode == "host") {
      o.rank_order.mode = RankOrderMode::kHost;
    } else if (mode == "topology") {
      o.rank_order.mode = RankOrderMode::kTopology;
    } else {
      return v.Invalid("rank_order", "unknown order", "auto, host or topology");
    }
    o.rank_order.group = v.Trimmed("topology_group");
    if (absl::Status valid = ValidateTopology(o.rank_order.group); !valid.ok()) {
      return v.From("topology_group", valid);
    }
    o.rank_order.file = v.Trimmed("topology_file");
    if (!o.rank_order.file.empty()) {
      std::optional<std::string> text = ReadWholeFile(o.rank_order.file);
      if (!text) return v.Invalid("topology_file", "cannot be read", "a readable file");
      absl::StatusOr<std::map<std::string, std::string>> groups =
          ParseTopologyFile(*text, o.rank_order.file);
      if (!groups.ok()) return groups.status();
      o.rank_order.file_groups = std::move(*groups);
    }
    return absl::OkStatus();
  };
  return group;
}

}  // namespace mxrun
