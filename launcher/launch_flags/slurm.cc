#include "launcher/launch_flags/slurm.h"

#include <algorithm>
#include <cstdint>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "rendezvous/net.h"
#include "rendezvous/node_topology.h"

namespace mxrun {
namespace {

absl::Status BadHostlist(absl::string_view expression, absl::string_view why) {
  return absl::InvalidArgumentError(
      absl::StrCat("hostlist '", expression, "' is not valid: ", why,
                   "; accepted: names such as gpu[01-04,07] or node1,node2"));
}

// Splits at commas outside brackets.
absl::StatusOr<std::vector<std::string>> SplitTopLevel(absl::string_view expression) {
  std::vector<std::string> items;
  std::string current;
  int depth = 0;
  for (char c : expression) {
    if (c == '[') {
      if (++depth > 1) return BadHostlist(expression, "nested '['");
    } else if (c == ']') {
      if (--depth < 0) return BadHostlist(expression, "']' without '['");
    }
    if (c == ',' && depth == 0) {
      items.push_back(std::move(current));
      current.clear();
    } else {
      current.push_back(c);
    }
  }
  if (depth != 0) return BadHostlist(expression, "'[' without ']'");
  items.push_back(std::move(current));
  for (const std::string& item : items) {
    if (item.empty()) return BadHostlist(expression, "an empty name");
  }
  return items;
}

// "01-04,07" -> {"01","02","03","04","07"}
absl::StatusOr<std::vector<std::string>> ExpandRanges(absl::string_view ranges,
                                                      absl::string_view expression) {
  std::vector<std::string> out;
  for (absl::string_view range : absl::StrSplit(ranges, ',')) {
    std::vector<absl::string_view> ends = absl::StrSplit(range, absl::MaxSplits('-', 1));
    auto digits = [](absl::string_view s) {
      return !s.empty() && s.size() <= 9 &&
             s.find_first_not_of("0123456789") == absl::string_view::npos;
    };
    if (!digits(ends[0]) || (ends.size() == 2 && !digits(ends[1]))) {
      return BadHostlist(expression, absl::StrCat("'[", ranges, "]' holds '", range,
                                                  "', not a number or a range N-M"));
    }
    int low = 0, high = 0;
    (void)absl::SimpleAtoi(ends[0], &low);
    high = low;
    if (ends.size() == 2) (void)absl::SimpleAtoi(ends[1], &high);
    if (high < low) {
      return BadHostlist(expression, absl::StrCat("the range ", range, " runs backwards"));
    }
    if (high - low >= kMaxHostlistHosts) {
      return BadHostlist(expression, absl::StrCat("more than ", kMaxHostlistHosts, " hosts"));
    }
    const int width = static_cast<int>(ends[0].size());
    for (int n = low; n <= high; ++n) {
      std::string number = std::to_string(n);
      if (static_cast<int>(number.size()) < width) {
        number.insert(0, width - number.size(), '0');
      }
      out.push_back(std::move(number));
    }
  }
  return out;
}

}  // namespace

absl::StatusOr<std::vector<std::string>> ExpandHostlist(absl::string_view expression) {
  if (expression.empty()) return BadHostlist(expression, "it is empty");
  absl::StatusOr<std::vector<std::string>> items = SplitTopLevel(expression);
  if (!items.ok()) return items.status();
  std::vector<std::string> hosts;
  for (const std::string& item : *items) {
    // Cartesian product over the bracket groups, left to right.
    std::vector<std::string> partial{""};
    std::size_t pos = 0;
    while (pos < item.size()) {
      const std::size_t open = item.find('[', pos);
      const std::string literal = item.substr(pos, open == std::string::npos ? open : open - pos);
      for (std::string& p : partial) p += literal;
      if (open == std::string::npos) break;
      const std::size_t close = item.find(']', open);
      absl::StatusOr<std::vector<std::string>> numbers =
          ExpandRanges(absl::string_view(item).substr(open + 1, close - open - 1), expression);
      if (!numbers.ok()) return numbers.status();
      if (partial.size() * numbers->size() + hosts.size() > kMaxHostlistHosts) {
        return BadHostlist(expression, absl::StrCat("more than ", kMaxHostlistHosts, " hosts"));
      }
      std::vector<std::string> next;
      for (const std::string& p : partial) {
        for (const std::string& n : *numbers) next.push_back(p + n);
      }
      partial = std::move(next);
      pos = close + 1;
    }
    hosts.insert(hosts.end(), partial.begin(), partial.end());
  }
  return hosts;
}

int SlurmRendezvousPort(absl::string_view job_id) {
  uint64_t id = 0;
  if (!absl::SimpleAtoi(job_id, &id)) {
    id = 1469598103934665603ULL;  // FNV-1a
    for (unsigned char c : job_id) id = (id ^ c) * 1099511628211ULL;
  }
  const uint64_t blocks = kSlurmRendezvousPortSpan / kSlurmRendezvousPortCandidates;
  return kSlurmRendezvousPortBase +
         static_cast<int>((id % blocks) * kSlurmRendezvousPortCandidates);
}

absl::StatusOr<std::optional<SlurmDefaults>> DetectSlurm(
    const std::map<std::string, std::string>& env) {
  auto get = [&](const char* key) -> const std::string* {
    auto it = env.find(key);
    return it == env.end() || it->second.empty() ? nullptr : &it->second;
  };
  const std::string* job_id = get("SLURM_JOB_ID");
  if (job_id == nullptr) return std::nullopt;
  SlurmDefaults d;
  d.job_id = *job_id;
  auto count = [&](const char* key, int min) -> absl::StatusOr<std::optional<int>> {
    const std::string* text = get(key);
    if (text == nullptr) return std::optional<int>();
    int n = 0;
    if (!absl::SimpleAtoi(*text, &n) || n < min) {
      return absl::InvalidArgumentError(
          absl::StrCat(key, "='", *text, "' is not an integer >= ", min, " (set by Slurm?)"));
    }
    return std::optional<int>(n);
  };
  auto nnodes = count(get("SLURM_NNODES") ? "SLURM_NNODES" : "SLURM_JOB_NUM_NODES", 1);
  if (!nnodes.ok()) return nnodes.status();
  if (*nnodes) d.flags["nnodes"] = std::to_string(**nnodes);
  // srun --ntasks-per-node=2 starts two agents on one node with the same SLURM_NODEID: mxrun is
  // one agent per node, starting --nproc_per_node workers itself. The node's first task runs the
  // job; the others stop at once, saying so (the master's "node rank already taken" would send
  // the user looking for a wrong --node_rank).
  auto local_id = count("SLURM_LOCALID", 0);
  if (!local_id.ok()) return local_id.status();
  if (*local_id && **local_id > 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "this is task ", **local_id, " of its node (SLURM_LOCALID=", **local_id,
        "), but mxrun is one agent per node and starts --nproc_per_node workers itself: run it "
        "with srun --ntasks-per-node=1 (this node's task 0 runs the job)"));
  }
  auto node_id = count("SLURM_NODEID", 0);
  if (!node_id.ok()) return node_id.status();
  if (*node_id && *nnodes && **node_id >= **nnodes) {  // found by tests/fuzz/cluster_env_fuzz
    return absl::InvalidArgumentError(
        absl::StrCat("SLURM_NODEID=", **node_id, " is not below the job's node count (",
                     get("SLURM_NNODES") ? "SLURM_NNODES" : "SLURM_JOB_NUM_NODES", "=", **nnodes,
                     "); these come from Slurm: is the environment of another job mixed in?"));
  }
  if (*node_id) d.flags["node_rank"] = std::to_string(**node_id);
  const char* list_key = get("SLURM_JOB_NODELIST") ? "SLURM_JOB_NODELIST" : "SLURM_NODELIST";
  std::vector<std::string> hosts;
  if (const std::string* list = get(list_key)) {
    absl::StatusOr<std::vector<std::string>> expanded = ExpandHostlist(*list);
    if (!expanded.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(list_key, ": ", expanded.status().message()));
    }
    hosts = std::move(*expanded);
  }
  // One node (an salloc shell, a one-node sbatch job) needs no rendezvous over the network: its
  // runs stay on the single-node path, and two of them never share a run id and a port.
  const int nodes = *nnodes ? **nnodes : std::max<int>(1, static_cast<int>(hosts.size()));
  if (nodes > 1) {
    if (!hosts.empty()) {
      d.flags["rdzv_backend"] = "c10d";
      d.flags["rdzv_endpoint"] = JoinHostPort(hosts.front(), SlurmRendezvousPort(*job_id));
    }
    d.flags["rdzv_id"] = absl::StrCat("slurm-", *job_id);
  }
  // Under TopologyPlugin=topology/tree, srun tells each task where its node sits.
  if (const std::string* addr = get("SLURM_TOPOLOGY_ADDR")) {
    const std::string* pattern = get("SLURM_TOPOLOGY_ADDR_PATTERN");
    const std::string group = SlurmTopologyGroup(*addr, pattern ? *pattern : "");
    if (!group.empty()) d.flags["topology_group"] = group;
  }
  // SLURM_GPUS_ON_NODE: a count; Slurm sets 0 or leaves it out when no GPUs were requested.
  if (const std::string* gpus = get("SLURM_GPUS_ON_NODE")) {
    int n = 0;
    if (absl::SimpleAtoi(*gpus, &n) && n > 0) d.flags["nproc_per_node"] = std::to_string(n);
  }
  return d;
}

}  // namespace mxrun
