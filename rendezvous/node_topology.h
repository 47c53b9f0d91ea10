#pragma once
// Where this node sits in the network, as it tells the master (NodeDesc::topology), so that node
// ranks follow switches and NVLink domains (rendezvous/master_state/rank_order.h; issue 37, item
// 1). Pure: the sources are read by their owners (the flag engine, Slurm's environment, NVML) and
// handed in.
//
// --rank_order: auto (default) uses whatever source this node has and is host order without one,
// which is what mxrun did before; host ignores the sources (host names in natural order);
// topology requires one, so that a job that counts on it does not quietly run without. The group
// path comes from --topology_group (also MXRUN_TOPOLOGY_GROUP, which a Kubernetes pod can fill
// from a label through the downward API), else Slurm's topology address (SLURM_TOPOLOGY_ADDR under
// TopologyPlugin=topology/tree), else the node's line in --topology_file; the node's NVLink domain
// (NVML's GPU fabric cluster and clique) is appended as the narrowest group.

#include <map>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace mxrun {

enum class RankOrderMode { kAuto, kHost, kTopology };

struct RankOrderSettings {
  RankOrderMode mode = RankOrderMode::kAuto;
  std::string group;  // --topology_group (or what Slurm implies): "spine0/leaf3"
  std::map<std::string, std::string> file_groups;  // --topology_file: host name -> group
  std::string file;                                // that file's path, for messages
};

// A --topology_file: one "HOST GROUP" per line (GROUP a '/'-separated path, widest first), blank
// lines and '#' comments ignored. Errors name the file and line and say what is accepted.
absl::StatusOr<std::map<std::string, std::string>> ParseTopologyFile(std::string_view text,
                                                                     const std::string& path);

// SLURM_TOPOLOGY_ADDR ("top.s0.n1") with SLURM_TOPOLOGY_ADDR_PATTERN ("switch.switch.node") as a
// group path ("top/s0"): the switches, without the node. "" when it names no switch.
std::string SlurmTopologyGroup(const std::string& addr, const std::string& pattern);

// This node's path for the rendezvous; `nvlink_domain` "" where NVML knows none. Errors
// (InvalidArgument, exit 2): --rank_order=topology with nothing to say, a path that is not valid.
absl::StatusOr<std::string> ResolveNodeTopology(const RankOrderSettings& settings,
                                                const std::string& host,
                                                const std::string& nvlink_domain);

}  // namespace mxrun
