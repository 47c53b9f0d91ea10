// The job and its rendezvous: how many nodes and workers, where they meet, how often they may
// restart. rendezvous_setup.h checks the combinations against the backend.

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "launcher/launch_flags/groups.h"
#include "launcher/launch_flags/value_parsers.h"

namespace mxrun {

absl::StatusOr<NodeRange> ParseNodeRange(absl::string_view text) {
  std::vector<absl::string_view> parts = absl::StrSplit(text, ':');
  NodeRange range;
  auto bad = [&] {
    return absl::InvalidArgumentError(absl::StrCat(
        "--nnodes='", text, "' is not valid; accepted: N or MIN:MAX with 0 < MIN <= MAX"));
  };
  if (parts.size() == 1) {
    if (!absl::SimpleAtoi(parts[0], &range.min)) return bad();
    range.max = range.min;
  } else if (parts.size() == 2) {
    if (!absl::SimpleAtoi(parts[0], &range.min) || !absl::SimpleAtoi(parts[1], &range.max)) {
      return bad();
    }
  } else {
    return bad();
  }
  if (range.min <= 0 || range.min > range.max) return bad();
  return range;
}

absl::StatusOr<std::map<std::string, std::string>> ParseRdzvConf(absl::string_view text) {
  std::map<std::string, std::string> conf;
  if (absl::StripAsciiWhitespace(text).empty()) return conf;
  for (absl::string_view item : absl::StrSplit(text, ',')) {
    std::pair<absl::string_view, absl::string_view> kv =
        absl::StrSplit(item, absl::MaxSplits('=', 1));
    std::string key(absl::StripAsciiWhitespace(kv.first));
    if (key.empty() || item.find('=') == absl::string_view::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("--rdzv_conf='", text, "' is not valid: '", item, "' is not key=value"));
    }
    conf[key] = std::string(absl::StripAsciiWhitespace(kv.second));
  }
  return conf;
}

LaunchFlagGroup JobFlags() {
  LaunchFlagGroup group;
  group.flags = {
      {"nnodes", "", false, "number of nodes, N or MIN:MAX", "1:1"},
      {"nproc_per_node", "", false, "workers per node: an integer, gpu, cpu or auto", "1"},
      {"node_rank", "", false, "rank of this node (static; a request in dynamic mode)", "0"},
      {"master_addr", "", false, "address of the node with rank 0 (static rendezvous)", "127.0.0.1",
       true, "MASTER_ADDR"},  // as Kubeflow's PyTorchJob (and many launch scripts) set it
      {"master_port", "", false, "port on master_addr (static rendezvous)", "29500", true,
       "MASTER_PORT"},
      {"rdzv_backend", "", false, "rendezvous backend: static, c10d, or etcd (etcd-v2)", "static"},
      {"rdzv_endpoint", "", false, "rendezvous endpoint host[:port]", ""},
      {"rdzv_id", "", false, "job id shared by every node", "none"},
      {"rdzv_conf", "", false, "rendezvous settings k=v,k=v", "", true, "", true},
      {"standalone", "", true, "single node with a private rendezvous on localhost", ""},
      {"max_restarts", "", false, "restarts of the worker group after failures", "0"},
      {"monitor_interval", "", false, "accepted for torchrun compatibility; mxrun is event-driven",
       "0.1"},
      {"role", "", false, "user-defined role of the workers", "default"},
      {"local_addr", "", false, "address this node advertises", ""},
  };
  group.apply = [](const FlagValues& v, LaunchOptions& o) -> absl::Status {
    absl::StatusOr<NodeRange> nnodes = ParseNodeRange(v.Text("nnodes"));
    if (!nnodes.ok()) return nnodes.status();
    o.nnodes = *nnodes;
    o.nproc_per_node = v.Trimmed("nproc_per_node");
    int n = 0;
    const bool numeric = absl::SimpleAtoi(o.nproc_per_node, &n);
    if ((numeric && (n < 1 || n > 4096)) ||
        (!numeric && o.nproc_per_node != "gpu" && o.nproc_per_node != "cpu" &&
         o.nproc_per_node != "auto")) {
      return v.Invalid("nproc_per_node", "not a worker count",
                       "an integer from 1 to 4096, 'gpu', 'cpu' or 'auto'");
    }
    absl::StatusOr<int> node_rank = v.Int("node_rank", 0, 1 << 20, "an integer >= 0");
    if (!node_rank.ok()) return node_rank.status();
    o.node_rank = *node_rank;
    o.node_rank_given = v.Given("node_rank");
    o.node_rank_from_scheduler = v["node_rank"].implied;
    absl::StatusOr<int> port = v.Int("master_port", 0, 65535, "a TCP port 0-65535");
    if (!port.ok()) return port.status();
    o.master_port = *port;
    absl::StatusOr<int> restarts = v.Int("max_restarts", 0, 1 << 20, "an integer >= 0");
    if (!restarts.ok()) return restarts.status();
    o.max_restarts = *restarts;
    o.master_addr = v.Text("master_addr");
    if (o.master_addr.empty()) return v.Invalid("master_addr", "empty", "a host name or IP");

    o.rdzv_backend = absl::AsciiStrToLower(v.Text("rdzv_backend"));
    // torchrun's etcd-v2 spelling: the same etcd, spoken to through its v3 API.
    if (o.rdzv_backend == "etcd-v2") o.rdzv_backend = "etcd";
    if (o.rdzv_backend != "static" && o.rdzv_backend != "c10d" && o.rdzv_backend != "etcd") {
      return v.Invalid("rdzv_backend", "unknown backend", "static, c10d, etcd or etcd-v2");
    }
    o.rdzv_endpoint = v.Text("rdzv_endpoint");
    o.rdzv_endpoint_from_slurm = absl::EndsWith(v["rdzv_endpoint"].source, "(from Slurm)");
    o.rdzv_id = v.Text("rdzv_id");
    absl::StatusOr<std::map<std::string, std::string>> conf = ParseRdzvConf(v.Text("rdzv_conf"));
    if (!conf.ok()) return conf.status();
    o.rdzv_conf = *conf;
    o.standalone = v.Bool("standalone");
    // torchrun 2.12+: a one-node job that names neither a rendezvous endpoint nor a master port
    // runs as --standalone does, so two such jobs on one host never share port 29500 (three at
    // once mixed their ranks and one exited 0 with a wrong sum, 2026-11-24). Its --rdzv_id is
    // replaced by a random one, as torchrun does.
    o.standalone_implied = !o.standalone && o.rdzv_backend == "static" && o.rdzv_endpoint.empty() &&
                           !v.Given("master_port") && o.nnodes.max == 1;
    absl::StatusOr<double> monitor = v.Seconds("monitor_interval");
    if (!monitor.ok()) return monitor.status();
    o.monitor_interval = *monitor;
    o.role = v.Text("role");
    if (o.role.empty()) return v.Invalid("role", "empty", "a non-empty name");
    o.local_addr = v.Text("local_addr");
    return absl::OkStatus();
  };
  return group;
}

}  // namespace mxrun
