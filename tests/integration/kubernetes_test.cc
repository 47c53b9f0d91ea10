// Two pods of a Kubernetes Indexed Job, as far as this machine allows: both agents run in a
// network namespace of the test's own (so the fixed port 29400 that every pod has to itself is
// free) and a mount namespace whose /etc/hosts is a private file laid out as the kubelet writes a
// pod's (the FQDN under the headless Service, then the short name). The variables are exactly
// those Kubernetes sets: JOB_COMPLETION_INDEX and HOSTNAME; PET_NNODES comes from the manifest.
// The machine's own /etc/hosts is never touched.

#include <catch2/catch.hpp>

#include <fstream>

#include "tests/subprocess.h"

using namespace std::chrono_literals;
using mxrun::testing::CountOccurrences;
using mxrun::testing::IntsAfter;
using mxrun::testing::ReadFile;
using mxrun::testing::TempDir;

TEST_CASE(
    "in an Indexed Job's pods mxrun infers rank, pod 0's endpoint and run id, and the job "
    "runs",
    "[kubernetes]") {
  TempDir dir;
  // The kubelet writes "IP FQDN hostname"; "resnet-0.resnet-workers" stands in for the name the
  // pods' DNS search path (ml.svc.cluster.local) resolves.
  std::ofstream(dir.path() + "/hosts")
      << "127.0.0.1 localhost\n"
         "127.0.0.1 resnet-0.resnet-workers.ml.svc.cluster.local resnet-0.resnet-workers resnet-0\n"
         "127.0.0.1 resnet-1.resnet-workers.ml.svc.cluster.local resnet-1.resnet-workers "
         "resnet-1\n";
  const std::string script = dir.path() + "/pods.sh";
  std::ofstream(script) << "ip link set lo up || exit 90\n"
                           "mount --bind \"$1/hosts\" /etc/hosts || exit 91\n"
                           "for i in 1 0; do\n"
                           "  JOB_COMPLETION_INDEX=$i HOSTNAME=resnet-$i PET_NNODES=2 \\\n"
                           "    \"$2\" --nproc_per_node=2 --no_python \"$3\" --ready \\\n"
                           "    >\"$1/out.$i\" 2>\"$1/err.$i\" &\n"
                           "  pids=\"$pids $!\"\n"
                           "done\n"
                           "for p in $pids; do wait $p; echo \"pod exit $?\"; done\n";
  mxrun::testing::ProcessResult r =
      mxrun::testing::Run({"unshare", "--mount", "--net", "--propagation", "private", "sh", script,
                           dir.path(), MXRUN_BIN, TEST_CHILD_BIN},
                          {}, 120s);
  const std::string out = ReadFile(dir.path() + "/out.0") + ReadFile(dir.path() + "/out.1");
  const std::string err0 = ReadFile(dir.path() + "/err.0");
  INFO(mxrun::testing::Describe(r) << "\npod 0:\n"
                                   << err0 << "\npod 1:\n"
                                   << ReadFile(dir.path() + "/err.1"));
  REQUIRE(r.exit_code == 0);
  CHECK(CountOccurrences(r.out, "pod exit 0") == 2);
  CHECK_THAT(err0, Catch::Contains("Kubernetes Indexed Job resnet: using --node_rank=0 "
                                   "--rdzv_backend=c10d "
                                   "--rdzv_endpoint=resnet-0.resnet-workers:29400 "
                                   "--rdzv_id=k8s-ml-resnet"));
  std::vector<int> ranks = IntsAfter(out, "ready rank");
  std::sort(ranks.begin(), ranks.end());
  CHECK(ranks == std::vector<int>{0, 1, 2, 3});
  CHECK(IntsAfter(out, "world") == std::vector<int>(4, 4));
  CHECK(CountOccurrences(out, "run=k8s-ml-resnet") == 4);
  // Pod 0 holds global ranks 0-1 (its index is its node rank).
  CHECK_THAT(ReadFile(dir.path() + "/out.0"),
             Catch::Contains("[n0 r0]") && Catch::Contains("[n0 r1]"));
}
