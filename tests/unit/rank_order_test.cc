#include "rendezvous/master_state/rank_order.h"

#include <catch2/catch.hpp>

#include <algorithm>

#include "rendezvous/node_topology.h"
#include "rendezvous/wire/validation.h"

namespace mxrun {
namespace {

// The hosts in the order RankOrder gives them; `master` hosts the master.
std::vector<std::string> Ordered(const std::vector<std::pair<std::string, std::string>>& hosts,
                                 const std::string& master = "") {
  std::vector<NodeDesc> descs;
  for (const auto& [host, topology] : hosts) {
    NodeDesc d;
    d.host = host;
    d.topology = topology;
    d.hosts_master = host == master;
    descs.push_back(d);
  }
  std::vector<RankOrder::Entry> entries;
  for (size_t i = 0; i < descs.size(); ++i) entries.push_back({&descs[i], i});
  const RankOrder order(entries);
  std::sort(entries.begin(), entries.end(),
            [&](const RankOrder::Entry& a, const RankOrder::Entry& b) { return order.Less(a, b); });
  std::vector<std::string> out;
  for (const RankOrder::Entry& e : entries) out.push_back(e.desc->host);
  return out;
}

using Hosts = std::vector<std::string>;

TEST_CASE("nodes of one switch get contiguous ranks, the master's switch first", "[rank_order]") {
  // Natural host order would interleave the two switches: node1 node2 node3 node4.
  const std::vector<std::pair<std::string, std::string>> nodes = {{"node1", "spine/leaf1"},
                                                                  {"node2", "spine/leaf0"},
                                                                  {"node3", "spine/leaf1"},
                                                                  {"node4", "spine/leaf0"}};
  CHECK(Ordered(nodes) == Hosts{"node2", "node4", "node1", "node3"});
  // node3 hosts the master: its switch first, itself first, so it keeps node rank 0.
  CHECK(Ordered(nodes, "node3") == Hosts{"node3", "node1", "node2", "node4"});
  // Without places: the master's host first, then natural order (node7 before node66).
  CHECK(Ordered({{"node66", ""}, {"node7", ""}, {"gpu", ""}}, "node66") ==
        Hosts{"node66", "gpu", "node7"});
}

TEST_CASE("the order is hierarchical: spine, then leaf, then NVLink domain", "[rank_order]") {
  const std::vector<std::pair<std::string, std::string>> nodes = {
      {"a", "s1/l3/nvl:x.0"}, {"b", "s0/l10/nvl:y.0"}, {"c", "s0/l2/nvl:z.0"},
      {"d", "s1/l3/nvl:w.0"}, {"e", "s0/l2/nvl:z.0"},  {"f", "s1/l3/nvl:x.0"}};
  // s0 before s1; within s0, l2 before l10 (natural); within s1/l3, domains w then x.
  CHECK(Ordered(nodes) == Hosts{"c", "e", "b", "d", "a", "f"});
  // The master on f: s1 first, l3, its domain x, f itself; then the rest in order.
  CHECK(Ordered(nodes, "f") == Hosts{"f", "a", "d", "c", "e", "b"});
}

TEST_CASE("a node's place: flag or Slurm, else its file line, then its NVLink domain",
          "[rank_order]") {
  RankOrderSettings s;
  CHECK(*ResolveNodeTopology(s, "n1", "") == "");
  CHECK(*ResolveNodeTopology(s, "n1", "nvl:ab.3") == "nvl:ab.3");
  s.group = "spine/leaf2";
  CHECK(*ResolveNodeTopology(s, "n1", "nvl:ab.3") == "spine/leaf2/nvl:ab.3");
  s.mode = RankOrderMode::kHost;
  CHECK(*ResolveNodeTopology(s, "n1", "nvl:ab.3") == "");
  s = RankOrderSettings{};
  s.file = "topo.txt";
  s.file_groups = *ParseTopologyFile("# racks\nn1 leaf1\n\nn2.cluster leaf2  # a comment\n", "t");
  CHECK(*ResolveNodeTopology(s, "n1.cluster.example", "") == "leaf1");  // its short name
  CHECK(*ResolveNodeTopology(s, "n2.cluster", "") == "leaf2");
  CHECK(*ResolveNodeTopology(s, "n3", "") == "");
  s.mode = RankOrderMode::kTopology;
  absl::StatusOr<std::string> none = ResolveNodeTopology(s, "n3", "");
  REQUIRE_FALSE(none.ok());
  CHECK_THAT(std::string(none.status().message()),
             Catch::Contains("--rank_order=topology: nothing says where this node (n3) sits") &&
                 Catch::Contains("topo.txt does not name it"));
}

TEST_CASE("topology files, Slurm's addresses and bad places", "[rank_order]") {
  CHECK(SlurmTopologyGroup("top.s0.n1", "switch.switch.node") == "top/s0");
  CHECK(SlurmTopologyGroup("s1.n3", "switch.node") == "s1");
  CHECK(SlurmTopologyGroup("n3", "node") == "");
  CHECK(SlurmTopologyGroup("top.s0.n1.example", "switch.switch.node") == "top/s0/n1");
  absl::StatusOr<std::map<std::string, std::string>> bad = ParseTopologyFile("n1\n", "f.txt");
  REQUIRE_FALSE(bad.ok());
  CHECK_THAT(std::string(bad.status().message()), Catch::StartsWith("f.txt:1: 1 words"));
  bad = ParseTopologyFile("n1 a\nn1 b\n", "f.txt");
  CHECK_THAT(std::string(bad.status().message()),
             Catch::StartsWith("f.txt:2: host 'n1' is named twice"));
  bad = ParseTopologyFile("n1 a//b\n", "f.txt");
  CHECK_THAT(std::string(bad.status().message()), Catch::Contains("an empty group"));
  CHECK(ValidateTopology("spine0/leaf-3/nvl:0a.1").ok());
  CHECK_THAT(std::string(ValidateTopology("leaf 3").message()),
             Catch::Contains("the character ' '"));
  CHECK_THAT(std::string(ValidateTopology(std::string(300, 'a')).message()),
             Catch::Contains("too long"));
  CHECK_FALSE(ValidateTopology("/a").ok());
  CHECK_FALSE(ValidateTopology("a/").ok());
}

}  // namespace
}  // namespace mxrun
