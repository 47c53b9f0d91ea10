#pragma once
// Running as a pod of a Kubernetes Indexed Job, the plain way to run one agent per pod: the flags
// mxrun can infer, as it does under Slurm (slurm.h), so that the pod template's command is just
// `mxrun --nnodes=N --nproc_per_node=G train.py`.
//
// What Kubernetes gives a pod of an Indexed Job (completionMode: Indexed): JOB_COMPLETION_INDEX
// (the index, 0..completions-1), and the hostname ${job name}-${index} (HOSTNAME). With the pod
// template's `subdomain` naming a headless Service, each pod also has the DNS name
// ${hostname}.${subdomain}.${namespace}.svc.${cluster domain}, which the kubelet writes into the
// pod's /etc/hosts. The Job's parallelism is not visible inside a pod: the manifest gives it as
// --nnodes (or PET_NNODES).

#include <functional>
#include <map>
#include <optional>
#include <string>

#include "absl/status/statusor.h"

namespace mxrun {

struct IndexedJobDefaults {
  std::string job_name;
  std::map<std::string, std::string> flags;  // node_rank, rdzv_backend, rdzv_endpoint, rdzv_id
};

// The pod's fully qualified name as its resolver gives it (getaddrinfo's canonical name of
// `host`, from /etc/hosts in a pod); "" when it has none.
std::string CanonicalHostName(const std::string& host);

// nullopt when JOB_COMPLETION_INDEX is not set. Otherwise: --node_rank from the index; a c10d
// rendezvous on pod 0 (${job name}-0.${subdomain}, found from this pod's name by `canonical_name`)
// at port 29400 (every pod has its own network namespace, so no other job shares it); --rdzv_id
// k8s-${namespace}-${job name}. Errors (InvalidArgument, naming what is wrong and what to do): a
// malformed index, a HOSTNAME that does not end in -${index}, a pod name without a subdomain (no
// headless Service: the other pods could not find pod 0).
absl::StatusOr<std::optional<IndexedJobDefaults>> DetectIndexedJob(
    const std::map<std::string, std::string>& env,
    const std::function<std::string(const std::string&)>& canonical_name = CanonicalHostName);

}  // namespace mxrun
