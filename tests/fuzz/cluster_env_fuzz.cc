// libFuzzer target: what a cluster tells mxrun through the environment, on arbitrary values:
// Slurm's variables (launcher/launch_flags/slurm), a Kubernetes Indexed Job's
// (launcher/launch_flags/kubernetes), --rdzv_conf strings and Slurm hostlists. Invariants after
// every input, not only "no crash": accepted variables give a layout that holds together (a node
// rank below the node count, the job's own port block and run id), refused ones name the variable;
// a --rdzv_conf written out again parses to the same settings.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "launcher/launch_flags/kubernetes.h"
#include "launcher/launch_flags/slurm.h"
#include "launcher/launch_flags/value_parsers.h"

namespace {

void Check(bool holds) {
  if (!holds) std::abort();  // an invariant broken: libFuzzer keeps the input
}

// The input cut at NUL bytes into at most `count` values.
std::vector<std::string> Values(const std::string& text, size_t count) {
  std::vector<std::string> out;
  size_t start = 0;
  for (size_t i = 0; i <= text.size() && out.size() < count; ++i) {
    if (i == text.size() || text[i] == '\0') {
      out.push_back(text.substr(start, i - start));
      start = i + 1;
    }
  }
  return out;
}

void CheckSlurm(const std::vector<std::string>& values) {
  static const char* kNames[] = {"SLURM_JOB_ID",       "SLURM_NNODES",       "SLURM_NODEID",
                                 "SLURM_JOB_NODELIST", "SLURM_GPUS_ON_NODE", "SLURM_JOB_NUM_NODES",
                                 "SLURM_NODELIST",     "SLURM_LOCALID"};
  std::map<std::string, std::string> env;
  for (size_t i = 0; i < values.size() && i < std::size(kNames); ++i) {
    // An empty value leaves the variable unset, so that inputs reach the paths without it.
    if (!values[i].empty()) env[kNames[i]] = values[i];
  }
  auto slurm = mxrun::DetectSlurm(env);
  if (!slurm.ok()) {
    Check(slurm.status().message().find("SLURM_") != std::string::npos);
    return;
  }
  if (!slurm->has_value()) {
    Check(env.count("SLURM_JOB_ID") == 0);
    return;
  }
  const mxrun::SlurmDefaults& d = **slurm;
  Check(d.job_id == env["SLURM_JOB_ID"]);
  int nnodes = 0, node_rank = 0;
  if (auto n = d.flags.find("nnodes"); n != d.flags.end()) {
    Check(absl::SimpleAtoi(n->second, &nnodes) && nnodes >= 1);
    if (auto r = d.flags.find("node_rank"); r != d.flags.end()) {
      Check(absl::SimpleAtoi(r->second, &node_rank) && node_rank >= 0 && node_rank < nnodes);
    }
  }
  if (auto e = d.flags.find("rdzv_endpoint"); e != d.flags.end()) {
    int port = 0;
    Check(absl::SimpleAtoi(e->second.substr(e->second.rfind(':') + 1), &port));
    Check(port >= mxrun::kSlurmRendezvousPortBase &&
          port < mxrun::kSlurmRendezvousPortBase + mxrun::kSlurmRendezvousPortSpan);
    Check(d.flags.at("rdzv_id") == "slurm-" + d.job_id);
  }
}

void CheckKubernetes(const std::vector<std::string>& values) {
  static const char* kNames[] = {"JOB_COMPLETION_INDEX", "HOSTNAME", "POD_NAMESPACE"};
  std::map<std::string, std::string> env;
  for (size_t i = 0; i < values.size() && i < std::size(kNames); ++i) {
    if (!values[i].empty()) env[kNames[i]] = values[i];
  }
  const std::string canonical = values.size() > 3 ? values[3] : "";
  auto job = mxrun::DetectIndexedJob(env, [&](const std::string&) { return canonical; });
  if (!job.ok()) {
    Check(!job.status().message().empty());
    return;
  }
  if (!job->has_value()) {
    Check(env.count("JOB_COMPLETION_INDEX") == 0);
    return;
  }
  int index = -1, rank = -2;
  Check(absl::SimpleAtoi(env["JOB_COMPLETION_INDEX"], &index));
  Check(absl::SimpleAtoi((*job)->flags.at("node_rank"), &rank) && rank == index);
}

void CheckRdzvConf(const std::string& text) {
  auto conf = mxrun::ParseRdzvConf(text);
  if (!conf.ok()) {
    Check(conf.status().message().find("--rdzv_conf") != std::string::npos);
    return;
  }
  std::string again;
  bool separable = true;
  for (const auto& [key, value] : *conf) {
    Check(!key.empty());
    if (key.find_first_of(",=") != std::string::npos || value.find(',') != std::string::npos) {
      separable = false;  // such a value cannot be written back in k=v,k=v form
    }
    again += (again.empty() ? "" : ",") + key + "=" + value;
  }
  if (separable && !conf->empty()) {
    auto reparsed = mxrun::ParseRdzvConf(again);
    Check(reparsed.ok() && *reparsed == *conf);
  }
}

void CheckHostlist(const std::string& text) {
  auto hosts = mxrun::ExpandHostlist(text);
  if (!hosts.ok()) {
    Check(!hosts.status().message().empty());
    return;
  }
  Check(hosts->size() <= static_cast<size_t>(mxrun::kMaxHostlistHosts));
  for (const std::string& host : *hosts) Check(host.find(',') == std::string::npos);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  const std::vector<std::string> values = Values(text, 8);
  CheckSlurm(values);
  CheckKubernetes(values);
  CheckRdzvConf(text);
  CheckHostlist(text.substr(0, 256));
  return 0;
}
