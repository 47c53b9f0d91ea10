#pragma once
// The order of a round's nodes, which their ranks follow (issue 37, item 1: ranks follow the
// network). Pure.
//
// A node may say where it sits (NodeDesc::topology): groups from the widest to the narrowest,
// '/'-separated, e.g. "spine0/leaf3" from Slurm's topology/tree, then "nvl:<id>" for its NVLink
// domain ("leaf3/nvl:0a1b...:0"). Nodes are ordered by that path, component by component, so that
// the nodes of every group get contiguous ranks and rings and trees stay inside a switch or an
// NVLink domain; at each level the group that holds the node hosting the master comes first, and
// that node first within it, so that it keeps node rank 0 (MASTER_ADDR stays the endpoint's
// host); other groups in natural order ("leaf2" before "leaf10"). Within a group: host names in
// natural order, then join order. A node without a path comes before those with one (a path that
// is a prefix of another comes first). Explicitly requested ranks (--node_rank) are placed by the
// caller before this order applies.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "rendezvous/wire/wire.h"

namespace mxrun {

// Natural order of host names: digit runs compare as numbers ("node7" < "node66").
bool NaturalLess(const std::string& a, const std::string& b);

// A topology path's components ("a/b" -> {"a", "b"}; "" -> {}).
std::vector<std::string> TopologyComponents(const std::string& topology);

class RankOrder {
 public:
  struct Entry {
    const NodeDesc* desc = nullptr;
    uint64_t join_order = 0;
  };
  // The nodes to order; the one with hosts_master set (if any) leads at every level.
  explicit RankOrder(const std::vector<Entry>& nodes);
  // A strict weak order over the entries given.
  bool Less(const Entry& a, const Entry& b) const;

 private:
  // Each node's path, split once (a sort compares a node O(log n) times).
  const std::vector<std::string>& PathOf(const NodeDesc* desc) const { return paths_.at(desc); }

  std::map<const NodeDesc*, std::vector<std::string>> paths_;
  std::vector<std::string> master_path_;
};

}  // namespace mxrun
