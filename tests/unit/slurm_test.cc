#include <set>

#include <catch2/catch.hpp>

#include "launcher/launch_flags/slurm.h"
#include "launcher/options.h"
#include "launcher/rendezvous_setup.h"
#include "tests/unit/parse_launch_args.h"

using mxrun::DetectSlurm;
using mxrun::ExpandHostlist;
using mxrun::kSlurmRendezvousPortBase;
using mxrun::kSlurmRendezvousPortCandidates;
using mxrun::kSlurmRendezvousPortSpan;
using mxrun::SlurmRendezvousPort;
using Hosts = std::vector<std::string>;

namespace {

std::string HostlistError(const std::string& expression) {
  auto hosts = ExpandHostlist(expression);
  return hosts.ok() ? "no error" : std::string(hosts.status().message());
}

// Recorded from a 2-node sbatch job (sbatch -N2 --gpus-per-node=4), node 1's view.
std::map<std::string, std::string> RecordedSlurmNode1() {
  return {{"SLURM_JOB_ID", "48213"},
          {"SLURM_JOBID", "48213"},
          {"SLURM_NNODES", "2"},
          {"SLURM_JOB_NUM_NODES", "2"},
          {"SLURM_NODEID", "1"},
          {"SLURM_PROCID", "1"},
          {"SLURM_JOB_NODELIST", "gpu[07-08]"},
          {"SLURM_NODELIST", "gpu[07-08]"},
          {"SLURM_GPUS_ON_NODE", "4"},
          {"SLURM_LOCALID", "0"},
          {"SLURMD_NODENAME", "gpu08"},
          {"SLURM_CLUSTER_NAME", "lab"}};
}

mxrun::ParseResult Parse(std::vector<std::string> args, std::map<std::string, std::string> env) {
  auto parsed = mxrun::testing::ParseLaunchArgs(std::move(args), std::move(env));
  REQUIRE(parsed.ok());
  return *parsed;
}

}  // namespace

TEST_CASE("hostlists expand ranges, lists and padding as Slurm does", "[slurm]") {
  CHECK(*ExpandHostlist("gpu[01-04,07]") == Hosts{"gpu01", "gpu02", "gpu03", "gpu04", "gpu07"});
  CHECK(*ExpandHostlist("node1") == Hosts{"node1"});
  CHECK(*ExpandHostlist("login1,gpu[9-11]") == Hosts{"login1", "gpu9", "gpu10", "gpu11"});
  CHECK(*ExpandHostlist("n[098-101]") == Hosts{"n098", "n099", "n100", "n101"});
  CHECK(*ExpandHostlist("rack[1-2]-n[1-2]") ==
        Hosts{"rack1-n1", "rack1-n2", "rack2-n1", "rack2-n2"});
  CHECK(*ExpandHostlist("a[1],b[2-3].dc") == Hosts{"a1", "b2.dc", "b3.dc"});
  CHECK(*ExpandHostlist("gpu[007]") == Hosts{"gpu007"});
}

TEST_CASE("malformed hostlists are errors quoting the expression", "[slurm]") {
  CHECK_THAT(HostlistError("gpu[01-04"), Catch::Contains("'[' without ']'"));
  CHECK_THAT(HostlistError("gpu01-04]"), Catch::Contains("']' without '['"));
  CHECK_THAT(HostlistError("gpu[4-1]"), Catch::Contains("runs backwards"));
  CHECK_THAT(HostlistError("gpu[a-b]"), Catch::Contains("not a number"));
  CHECK_THAT(HostlistError("gpu[]"), Catch::Contains("not a number"));
  CHECK_THAT(HostlistError("a,,b"), Catch::Contains("an empty name"));
  CHECK_THAT(HostlistError(""), Catch::Contains("empty"));
  CHECK_THAT(HostlistError("n[[1]]"), Catch::Contains("nested"));
  CHECK_THAT(HostlistError("n[0-99999]"), Catch::Contains("more than 65536 hosts"));
  CHECK_THAT(HostlistError("gpu[01-04"), Catch::Contains("'gpu[01-04'"));
}

TEST_CASE("outside Slurm nothing is inferred", "[slurm]") {
  auto d = DetectSlurm({{"PATH", "/bin"}});
  REQUIRE(d.ok());
  CHECK_FALSE(d->has_value());
}

TEST_CASE("a recorded Slurm environment gives nodes, rank, endpoint, id and GPUs", "[slurm]") {
  auto d = DetectSlurm(RecordedSlurmNode1());
  REQUIRE(d.ok());
  REQUIRE(d->has_value());
  const auto& flags = (*d)->flags;
  CHECK(flags.at("nnodes") == "2");
  CHECK(flags.at("node_rank") == "1");
  CHECK(flags.at("rdzv_backend") == "c10d");
  CHECK(flags.at("rdzv_endpoint") == "gpu07:20852");  // 20000 + (48213 mod 3000) x 4
  CHECK(flags.at("rdzv_id") == "slurm-48213");
  CHECK(flags.at("nproc_per_node") == "4");
}

TEST_CASE("malformed Slurm variables name the variable", "[slurm]") {
  auto env = RecordedSlurmNode1();
  env["SLURM_NNODES"] = "two";
  CHECK_THAT(std::string(DetectSlurm(env).status().message()),
             Catch::Contains("SLURM_NNODES='two'"));
  env = RecordedSlurmNode1();
  env["SLURM_JOB_NODELIST"] = "gpu[07-08";
  CHECK_THAT(std::string(DetectSlurm(env).status().message()),
             Catch::Contains("SLURM_JOB_NODELIST"));
}

TEST_CASE("mxrun fills unset flags from Slurm and says so in one line", "[slurm]") {
  auto parsed = Parse({"train.py"}, RecordedSlurmNode1());
  REQUIRE(parsed.options);
  const auto& o = *parsed.options;
  CHECK(o.nnodes.min == 2);
  CHECK(o.nnodes.max == 2);
  CHECK(o.node_rank == 1);
  CHECK(o.rdzv_backend == "c10d");
  CHECK(o.rdzv_endpoint == "gpu07:20852");
  CHECK(o.rdzv_endpoint_from_slurm);
  CHECK(o.rdzv_id == "slurm-48213");
  CHECK(o.nproc_per_node == "4");
  REQUIRE(parsed.notices.size() == 1);
  CHECK_THAT(parsed.notices[0], Catch::Contains("Slurm job 48213"));
  CHECK_THAT(parsed.notices[0], Catch::Contains("--rdzv_endpoint=gpu07:20852"));
}

TEST_CASE("flags and PET_* variables win over Slurm, and standalone jobs ignore it", "[slurm]") {
  auto env = RecordedSlurmNode1();
  env["PET_NPROC_PER_NODE"] = "2";
  auto parsed = Parse({"--nnodes=1:4", "--rdzv_endpoint=head:1234", "train.py"}, env);
  const auto& o = *parsed.options;
  CHECK(o.nnodes.min == 1);
  CHECK(o.nnodes.max == 4);
  CHECK(o.nproc_per_node == "2");
  CHECK(o.rdzv_endpoint == "head:1234");
  CHECK_FALSE(o.rdzv_endpoint_from_slurm);
  CHECK(o.node_rank == 1);  // still from Slurm
  REQUIRE(parsed.notices.size() == 1);
  CHECK_THAT(parsed.notices[0], !Catch::Contains("--nnodes"));

  auto standalone = Parse({"--standalone", "train.py"}, RecordedSlurmNode1());
  CHECK(standalone.options->nnodes.max == 1);
  CHECK(standalone.notices.empty());
}

TEST_CASE("a one-node Slurm allocation keeps mxrun on the single-node path", "[slurm]") {
  // An salloc shell on one node: every mxrun run in it must stay local, not host a master on
  // one port under one shared run id.
  const std::map<std::string, std::string> env = {{"SLURM_JOB_ID", "48214"},
                                                  {"SLURM_NNODES", "1"},
                                                  {"SLURM_NODEID", "0"},
                                                  {"SLURM_JOB_NODELIST", "gpu07"},
                                                  {"SLURM_GPUS_ON_NODE", "2"}};
  auto d = DetectSlurm(env);
  REQUIRE(d.ok());
  REQUIRE(d->has_value());
  const auto& flags = (*d)->flags;
  CHECK(flags.at("nnodes") == "1");
  CHECK(flags.at("nproc_per_node") == "2");
  CHECK(flags.count("rdzv_backend") == 0);
  CHECK(flags.count("rdzv_endpoint") == 0);
  CHECK(flags.count("rdzv_id") == 0);

  auto parsed = Parse({"train.py"}, env);
  const auto& o = *parsed.options;
  CHECK(o.rdzv_backend == "static");
  CHECK(o.rdzv_endpoint.empty());
  CHECK(o.rdzv_id == "none");
  CHECK_FALSE(mxrun::NeedsNetwork(o));

  // Without SLURM_NNODES the node list's length decides.
  auto listed = DetectSlurm({{"SLURM_JOB_ID", "7"}, {"SLURM_NODELIST", "gpu[07-08]"}});
  REQUIRE(listed.ok());
  CHECK((**listed).flags.at("rdzv_endpoint") == "gpu07:20028");
  auto single = DetectSlurm({{"SLURM_JOB_ID", "7"}, {"SLURM_NODELIST", "gpu07"}});
  REQUIRE(single.ok());
  CHECK((**single).flags.count("rdzv_endpoint") == 0);
}

TEST_CASE("each Slurm job gets a block of rendezvous ports of its own", "[slurm]") {
  // Jobs submitted one after another (ids in sequence) never share a port of their blocks, and
  // every port lies below the kernel's ephemeral range.
  std::set<int> taken;
  for (int id = 100000; id < 100000 + kSlurmRendezvousPortSpan / kSlurmRendezvousPortCandidates;
       ++id) {
    const int port = SlurmRendezvousPort(std::to_string(id));
    CHECK(port >= kSlurmRendezvousPortBase);
    CHECK(port + kSlurmRendezvousPortCandidates - 1 <
          kSlurmRendezvousPortBase + kSlurmRendezvousPortSpan);
    CHECK(port + kSlurmRendezvousPortCandidates - 1 < 32768);
    for (int i = 0; i < kSlurmRendezvousPortCandidates; ++i) CHECK(taken.insert(port + i).second);
  }
  CHECK(SlurmRendezvousPort("48213") == 20852);
  // Not a number (a scheduler that wraps Slurm's ids): a hash, in range, the same every time.
  const int hashed = SlurmRendezvousPort("job-7a");
  CHECK(hashed == SlurmRendezvousPort("job-7a"));
  CHECK(hashed >= kSlurmRendezvousPortBase);
  CHECK(hashed < kSlurmRendezvousPortBase + kSlurmRendezvousPortSpan);
  CHECK((hashed - kSlurmRendezvousPortBase) % kSlurmRendezvousPortCandidates == 0);
}

TEST_CASE("a second srun task on one node is told to use one task per node", "[slurm]") {
  auto env = RecordedSlurmNode1();
  env["SLURM_LOCALID"] = "0";
  CHECK(DetectSlurm(env).ok());
  env["SLURM_LOCALID"] = "1";
  auto d = DetectSlurm(env);
  REQUIRE_FALSE(d.ok());
  CHECK_THAT(std::string(d.status().message()),
             Catch::Contains("SLURM_LOCALID=1") && Catch::Contains("srun --ntasks-per-node=1"));
}

TEST_CASE("SLURM_NODEID at or past the node count is refused, naming both variables", "[slurm]") {
  // Found by tests/fuzz/cluster_env_fuzz: node rank 4 of a 2-node job went on to the launcher.
  auto env = RecordedSlurmNode1();
  env["SLURM_NODEID"] = "2";
  auto d = DetectSlurm(env);
  REQUIRE_FALSE(d.ok());
  CHECK_THAT(std::string(d.status().message()),
             Catch::Contains("SLURM_NODEID=2 is not below the job's node count (SLURM_NNODES=2)"));
  env.erase("SLURM_NNODES");
  d = DetectSlurm(env);
  REQUIRE_FALSE(d.ok());
  CHECK_THAT(std::string(d.status().message()), Catch::Contains("SLURM_JOB_NUM_NODES=2"));
}
