// A pod of a Kubernetes Indexed Job: the flags mxrun infers from what Kubernetes gives the pod
// (JOB_COMPLETION_INDEX, HOSTNAME = ${job name}-${index}, the DNS name under the headless Service
// that the kubelet writes into /etc/hosts). The resolver is injected; the integration test runs
// the real one against a private /etc/hosts.
#include <catch2/catch.hpp>

#include "launcher/launch_flags/kubernetes.h"
#include "tests/unit/parse_launch_args.h"

using mxrun::DetectIndexedJob;

namespace {

// As in a pod of Job "resnet" (subdomain "resnet-workers", namespace "ml"): the kubelet's
// /etc/hosts line "10.244.1.7 resnet-1.resnet-workers.ml.svc.cluster.local resnet-1".
std::string PodResolver(const std::string& host) {
  return host + ".resnet-workers.ml.svc.cluster.local";
}

std::map<std::string, std::string> PodEnv(const std::string& index) {
  return {{"JOB_COMPLETION_INDEX", index},
          {"HOSTNAME", "resnet-" + index},
          {"KUBERNETES_SERVICE_HOST", "10.96.0.1"},
          {"KUBERNETES_SERVICE_PORT", "443"}};
}

std::string Error(const std::map<std::string, std::string>& env,
                  std::string (*resolver)(const std::string&) = PodResolver) {
  auto d = DetectIndexedJob(env, resolver);
  return d.ok() ? "no error" : std::string(d.status().message());
}

}  // namespace

TEST_CASE("outside an Indexed Job nothing is inferred", "[kubernetes]") {
  auto d = DetectIndexedJob({{"HOSTNAME", "box"}, {"KUBERNETES_SERVICE_HOST", "10.96.0.1"}},
                            PodResolver);
  REQUIRE(d.ok());
  CHECK_FALSE(d->has_value());
}

TEST_CASE("an Indexed Job's pod gives node rank, pod 0's endpoint and a run id", "[kubernetes]") {
  auto d = DetectIndexedJob(PodEnv("1"), PodResolver);
  REQUIRE(d.ok());
  REQUIRE(d->has_value());
  CHECK((*d)->job_name == "resnet");
  const auto& flags = (*d)->flags;
  CHECK(flags.at("node_rank") == "1");
  CHECK(flags.at("rdzv_backend") == "c10d");
  CHECK(flags.at("rdzv_endpoint") == "resnet-0.resnet-workers:29400");
  CHECK(flags.at("rdzv_id") == "k8s-ml-resnet");
  // A job name with dashes and digits of its own.
  auto dashed =
      DetectIndexedJob({{"JOB_COMPLETION_INDEX", "12"}, {"HOSTNAME", "llm-7b-12"}}, PodResolver);
  REQUIRE(dashed.ok());
  CHECK((*dashed)->job_name == "llm-7b");
  CHECK((*dashed)->flags.at("rdzv_endpoint") == "llm-7b-0.resnet-workers:29400");
}

TEST_CASE("what an Indexed Job's pod cannot use is an error that says what to do", "[kubernetes]") {
  CHECK_THAT(Error({{"JOB_COMPLETION_INDEX", "one"}, {"HOSTNAME", "resnet-1"}}),
             Catch::Contains("JOB_COMPLETION_INDEX='one' is not an integer"));
  CHECK_THAT(Error({{"JOB_COMPLETION_INDEX", "1"}, {"HOSTNAME", "resnet-2"}}),
             Catch::Contains("does not end in '-1'"));
  CHECK_THAT(Error({{"JOB_COMPLETION_INDEX", "1"}}), Catch::Contains("HOSTNAME=''"));
  // No headless Service: the pod's name has no subdomain.
  CHECK_THAT(
      Error(PodEnv("1"), [](const std::string& host) { return host; }),
      Catch::Contains("no DNS name under a headless Service") && Catch::Contains("subdomain"));
  CHECK_THAT(Error(PodEnv("1"), [](const std::string&) { return std::string(); }),
             Catch::Contains("no DNS name under a headless Service"));
}

TEST_CASE("mxrun in an Indexed Job's pod needs --nnodes, and given flags win", "[kubernetes]") {
  auto missing = mxrun::testing::ParseLaunchArgs({"train.py"}, PodEnv("1"));
  REQUIRE_FALSE(missing.ok());
  CHECK_THAT(std::string(missing.status().message()),
             Catch::Contains("give --nnodes (or PET_NNODES"));
  // An endpoint given: nothing is inferred, not even the pod's name is looked up.
  auto given = mxrun::testing::ParseLaunchArgs(
      {"--nnodes=2", "--rdzv_backend=c10d", "--rdzv_endpoint=head:1234", "--rdzv_id=x", "train.py"},
      PodEnv("1"));
  REQUIRE(given.ok());
  CHECK(given->options->rdzv_endpoint == "head:1234");
  CHECK(given->notices.empty());
}
