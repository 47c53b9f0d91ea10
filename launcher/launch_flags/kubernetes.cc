#include "launcher/launch_flags/kubernetes.h"

#include <netdb.h>
#include <sys/socket.h>

#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "rendezvous/net.h"

namespace mxrun {

std::string CanonicalHostName(const std::string& host) {
  addrinfo hints{};
  hints.ai_flags = AI_CANONNAME;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.c_str(), nullptr, &hints, &found) != 0) return "";
  std::string name = found->ai_canonname != nullptr ? found->ai_canonname : "";
  freeaddrinfo(found);
  return name;
}

absl::StatusOr<std::optional<IndexedJobDefaults>> DetectIndexedJob(
    const std::map<std::string, std::string>& env,
    const std::function<std::string(const std::string&)>& canonical_name) {
  auto index_it = env.find("JOB_COMPLETION_INDEX");
  if (index_it == env.end() || index_it->second.empty()) return std::nullopt;
  int index = 0;
  if (!absl::SimpleAtoi(index_it->second, &index) || index < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("JOB_COMPLETION_INDEX='", index_it->second,
                     "' is not an integer >= 0 (set by Kubernetes for an Indexed Job?)"));
  }
  auto host_it = env.find("HOSTNAME");
  const std::string host = host_it == env.end() ? "" : host_it->second;
  const std::string suffix = absl::StrCat("-", index);
  if (host.size() <= suffix.size() || !absl::EndsWith(host, suffix)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "JOB_COMPLETION_INDEX=", index, " but HOSTNAME='", host, "' does not end in '", suffix,
        "': an Indexed Job's pods are named ${job name}-${index}; give --rdzv_endpoint and "
        "--node_rank yourself if this pod is named otherwise"));
  }
  IndexedJobDefaults d;
  d.job_name = host.substr(0, host.size() - suffix.size());
  // host.subdomain.namespace.svc.cluster-domain
  const std::string fqdn = canonical_name(host);
  std::vector<std::string> labels = absl::StrSplit(fqdn, '.');
  if (labels.size() < 3 || labels[0] != host) {
    return absl::InvalidArgumentError(absl::StrCat(
        "this pod of Indexed Job '", d.job_name, "' has no DNS name under a headless Service ('",
        host, "' resolves as '", fqdn,
        "'): the pods find pod 0 through one. Create a Service "
        "with clusterIP: None selecting the Job's pods and name it in the pod template's "
        "subdomain (scripts/k8s/indexed-job.yaml), or give --rdzv_endpoint"));
  }
  const std::string& subdomain = labels[1];
  const std::string& name_space = labels[2];
  d.flags["node_rank"] = std::to_string(index);
  d.flags["rdzv_backend"] = "c10d";
  d.flags["rdzv_endpoint"] =
      JoinHostPort(absl::StrCat(d.job_name, "-0.", subdomain), kDefaultRendezvousPort);
  d.flags["rdzv_id"] = absl::StrCat("k8s-", name_space, "-", d.job_name);
  return d;
}

}  // namespace mxrun
