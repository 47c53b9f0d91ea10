// mxrun under a real Slurm (tests/slurm_cluster.h: slurmctld and two slurmd, n0 and n1, on this
// host): srun on one and two nodes, salloc, sbatch of a small script and of the example script
// unchanged, scancel mid-run with nothing left, a preemption signal reaching the workers, two jobs
// sharing both nodes with one cancelled, and a requeued job resuming from its checkpoint (this one
// and the example script's need the bundled trainer built). Every wait is bounded; every
// process is started here and stopped by pid or by Slurm, and whatever a failing case leaves dies
// with the binary's own PID namespace (tests/slurm/harness.cc).

#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "tests/slurm/slurm_jobs.h"
#include "tests/slurm_cluster.h"
#include "tests/subprocess.h"

using namespace std::chrono_literals;
using mxrun::testing::CountOccurrences;
using mxrun::testing::IntsAfter;
using mxrun::testing::ProcessResult;
using mxrun::testing::ReadEnvFile;
using mxrun::testing::ReadFile;
using mxrun::testing::Run;
using mxrun::testing::SlurmCluster;
using mxrun::testing::Submit;
using mxrun::testing::WaitForLines;

namespace {

const std::string kMxrun = MXRUN_BIN;
const std::string kChild = TEST_CHILD_BIN;

std::vector<int> Sorted(std::vector<int> v) {
  std::sort(v.begin(), v.end());
  return v;
}

// Every "run=<id>" word of test_child's ready lines.
std::vector<std::string> RunIds(const std::string& text) {
  std::vector<std::string> ids;
  for (size_t at = text.find(" run="); at != std::string::npos; at = text.find(" run=", at + 1)) {
    const size_t start = at + 5;
    ids.push_back(text.substr(start, text.find_first_of(" \n", start) - start));
  }
  return ids;
}

std::string MxrunChild(const std::string& mxrun_flags, const std::string& child_flags) {
  return "srun " + kMxrun + " " + mxrun_flags + " --no_python " + kChild + " " + child_flags;
}

// Every word `key=...` of `text`, in order.
std::vector<std::string> WordsAfter(const std::string& text, const std::string& key) {
  std::vector<std::string> words;
  const std::string needle = key + "=";
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) {
    if (at > 0 && text[at - 1] != ' ' && text[at - 1] != '\n') continue;
    const size_t start = at + needle.size();
    words.push_back(text.substr(start, text.find_first_of(" \n", start) - start));
  }
  return words;
}

// The environments test_child --env-out=DIR wrote, by global rank (env.<RANK>).
std::map<int, std::map<std::string, std::string>> WorkerEnvs(const std::string& dir, int world) {
  std::map<int, std::map<std::string, std::string>> envs;
  for (int rank = 0; rank < world; ++rank) {
    envs[rank] = ReadEnvFile(dir + "/env." + std::to_string(rank));
  }
  return envs;
}

}  // namespace

TEST_CASE("srun runs a step on one node and on two, with Slurm's variables", "[slurm]") {
  SlurmCluster cluster;
  const std::string print =
      "echo node=$SLURM_NODEID name=$SLURMD_NODENAME nodes=$SLURM_NNODES "
      "list=$SLURM_JOB_NODELIST job=$SLURM_JOB_ID";
  ProcessResult two = Run({"srun", "-N2", "--ntasks-per-node=1", "sh", "-c", print}, {}, 60s);
  INFO(mxrun::testing::Describe(two));
  REQUIRE(two.exit_code == 0);
  CHECK(Sorted(IntsAfter(two.out, "node")) == std::vector<int>{0, 1});
  std::vector<std::string> names = WordsAfter(two.out, "name");
  std::sort(names.begin(), names.end());
  CHECK(names == std::vector<std::string>{"n0", "n1"});
  CHECK(WordsAfter(two.out, "list") == std::vector<std::string>(2, "n[0-1]"));
  const std::vector<int> two_jobs = IntsAfter(two.out, "job");
  REQUIRE(two_jobs.size() == 2);
  CHECK(two_jobs[0] > 0);
  CHECK(two_jobs[1] == two_jobs[0]);

  ProcessResult one = Run({"srun", "-N1", "sh", "-c", print}, {}, 60s);
  INFO(mxrun::testing::Describe(one));
  REQUIRE(one.exit_code == 0);
  CHECK(IntsAfter(one.out, "node") == std::vector<int>{0});
  CHECK(IntsAfter(one.out, "nodes") == std::vector<int>{1});
  const std::vector<std::string> list = WordsAfter(one.out, "list");
  REQUIRE(list.size() == 1);
  CHECK((list[0] == "n0" || list[0] == "n1"));
  CHECK(WordsAfter(one.out, "name") == list);
  const std::vector<int> one_job = IntsAfter(one.out, "job");
  REQUIRE(one_job.size() == 1);
  CHECK(one_job[0] > two_jobs[0]);
}

TEST_CASE("srun mxrun on two nodes and on one takes its layout from Slurm", "[slurm]") {
  SlurmCluster cluster;
  const std::string env2 = cluster.jobs() + "/env2";
  REQUIRE(mkdir(env2.c_str(), 0755) == 0);
  ProcessResult two = Run({"srun", "-N2", "--ntasks-per-node=1", kMxrun, "--nproc_per_node=2",
                           "--no_python", kChild, "--ready", "--env-out=" + env2},
                          {}, 120s);
  INFO(mxrun::testing::Describe(two));
  REQUIRE(two.exit_code == 0);
  CHECK(Sorted(IntsAfter(two.out, "ready rank")) == std::vector<int>{0, 1, 2, 3});
  CHECK(IntsAfter(two.out, "world") == std::vector<int>(4, 4));
  CHECK_THAT(two.err, Catch::Contains("Slurm job") && Catch::Contains("--nnodes=2") &&
                          Catch::Contains("--rdzv_endpoint=n0:"));
  // Each worker's environment: its place in the 2x2 layout, on the node Slurm put it, and the
  // run id made of Slurm's job id.
  auto envs = WorkerEnvs(env2, 4);
  const std::string job = envs[0]["SLURM_JOB_ID"];
  REQUIRE_FALSE(job.empty());
  CHECK(RunIds(two.out) == std::vector<std::string>(4, "slurm-" + job));
  std::set<std::string> nodes;
  for (auto& [rank, env] : envs) {
    INFO("rank " << rank);
    CHECK(env["RANK"] == std::to_string(rank));
    CHECK(env["WORLD_SIZE"] == "4");
    CHECK(env["LOCAL_WORLD_SIZE"] == "2");
    CHECK(env["GROUP_WORLD_SIZE"] == "2");
    CHECK(env["LOCAL_RANK"] == std::to_string(rank % 2));
    CHECK(env["GROUP_RANK"] == std::to_string(rank / 2));
    CHECK(env["GROUP_RANK"] == env["SLURM_NODEID"]);
    CHECK(env["SLURM_JOB_ID"] == job);
    CHECK(env["TORCHELASTIC_RUN_ID"] == "slurm-" + job);
    CHECK(env["MASTER_ADDR"] == envs[0]["MASTER_ADDR"]);  // rank 0's node, as an address
    nodes.insert(env["SLURMD_NODENAME"]);
  }
  CHECK(nodes == std::set<std::string>{"n0", "n1"});
  CHECK_FALSE(envs[0]["MASTER_ADDR"].empty());

  const std::string env1 = cluster.jobs() + "/env1";
  REQUIRE(mkdir(env1.c_str(), 0755) == 0);
  ProcessResult one = Run({"srun", "-N1", kMxrun, "--nproc_per_node=2", "--no_python", kChild,
                           "--ready", "--env-out=" + env1},
                          {}, 120s);
  INFO(mxrun::testing::Describe(one));
  CHECK(one.exit_code == 0);
  CHECK(Sorted(IntsAfter(one.out, "ready rank")) == std::vector<int>{0, 1});
  CHECK(IntsAfter(one.out, "world") == std::vector<int>(2, 2));
  envs = WorkerEnvs(env1, 2);
  const std::string job1 = envs[0]["SLURM_JOB_ID"];
  REQUIRE_FALSE(job1.empty());
  CHECK(job1 != job);
  // One node: mxrun runs the job standalone (its own master, a random run id), both workers in it.
  const std::vector<std::string> one_ids = RunIds(one.out);
  REQUIRE(one_ids.size() == 2);
  CHECK_FALSE(one_ids[0].empty());
  CHECK(one_ids[1] == one_ids[0]);
  for (auto& [rank, env] : envs) {
    INFO("rank " << rank);
    CHECK(env["RANK"] == std::to_string(rank));
    CHECK(env["LOCAL_RANK"] == std::to_string(rank));
    CHECK(env["WORLD_SIZE"] == "2");
    CHECK(env["GROUP_RANK"] == "0");
  }
  // Two tasks on one node: the second is told to use one task per node; the job still runs.
  ProcessResult doubled = Run({"srun", "-N1", "--ntasks-per-node=2", kMxrun, "--nproc_per_node=1",
                               "--no_python", kChild, "--ready"},
                              {}, 120s);
  INFO(mxrun::testing::Describe(doubled));
  CHECK_THAT(doubled.err,
             Catch::Contains("SLURM_LOCALID=1") && Catch::Contains("srun --ntasks-per-node=1"));
  CHECK(CountOccurrences(doubled.out, "ready rank=0") == 1);
}

TEST_CASE(
    "under Slurm's topology/tree node ranks follow the switches, and --rank_order=host the "
    "node ids",
    "[slurm][rank_order]") {
  // Four nodes under two leaf switches that interleave their names: s0 holds n0 and n2.
  SlurmCluster cluster(4,
                       "SwitchName=s0 Nodes=n0,n2\nSwitchName=s1 Nodes=n1,n3\n"
                       "SwitchName=top Switches=s0,s1\n");
  auto run = [&](const std::string& name, const std::string& order) {
    const std::string dir = cluster.jobs() + "/" + name;
    REQUIRE(mkdir(dir.c_str(), 0755) == 0);
    ProcessResult r =
        Run({"srun", "-N4", "--ntasks-per-node=1", kMxrun, "--nproc_per_node=1",
             "--rank_order=" + order, "--no_python", kChild, "--ready", "--env-out=" + dir},
            {}, 120s);
    INFO(mxrun::testing::Describe(r));
    REQUIRE(r.exit_code == 0);
    return WorkerEnvs(dir, 4);
  };
  auto envs = run("by-switch", "auto");
  std::vector<std::string> nodes, places;
  for (auto& [rank, env] : envs) {
    nodes.push_back(env["SLURMD_NODENAME"]);
    places.push_back(env["SLURM_TOPOLOGY_ADDR"]);
  }
  INFO("topology addresses: " << absl::StrJoin(places, " "));
  // n0 (node 0, which hosts the master) keeps rank 0; its switch's other node comes next, then
  // s1's two. (All four "nodes" are this machine, with one host name: within a switch the
  // master's tie-break is then the order they joined in, where real nodes sort by name.)
  REQUIRE(nodes.size() == 4);
  CHECK(nodes[0] == "n0");
  CHECK(nodes[1] == "n2");
  CHECK(std::set<std::string>{nodes[2], nodes[3]} == std::set<std::string>{"n1", "n3"});
  CHECK(places[0] == "top.s0.n0");
  envs = run("by-host", "host");
  nodes.clear();
  for (auto& [rank, env] : envs) nodes.push_back(env["SLURMD_NODENAME"]);
  CHECK(nodes == std::vector<std::string>{"n0", "n1", "n2", "n3"});
}

TEST_CASE("salloc runs a step on its allocation without a terminal", "[slurm]") {
  SlurmCluster cluster;
  // stdin is /dev/null (Subprocess): salloc runs its command and returns when it ends.
  ProcessResult r = Run({"salloc", "-N2", "srun", "--ntasks-per-node=1", "sh", "-c",
                         "echo node=$SLURM_NODEID list=$SLURM_JOB_NODELIST job=$SLURM_JOB_ID"},
                        {}, 60s);
  INFO(mxrun::testing::Describe(r));
  REQUIRE(r.exit_code == 0);
  CHECK(Sorted(IntsAfter(r.out, "node")) == std::vector<int>{0, 1});
  CHECK(WordsAfter(r.out, "list") == std::vector<std::string>(2, "n[0-1]"));
  const std::vector<int> jobs = IntsAfter(r.out, "job");
  REQUIRE(jobs.size() == 2);
  CHECK(jobs[1] == jobs[0]);
  // salloc says which allocation it got and that it gave it back.
  CHECK_THAT(r.err, Catch::Contains("Granted job allocation " + std::to_string(jobs[0])) &&
                        Catch::Contains("Relinquishing job allocation " + std::to_string(jobs[0])));
}

TEST_CASE("sbatch of a script running srun mxrun: the job completes with four workers of its own",
          "[slurm]") {
  SlurmCluster cluster;
  // No --wait: the job is followed the way a user without accounting (sacct) would, through
  // scontrol show job, until it has finished.
  const std::string id = Submit(cluster, "batch", MxrunChild("--nproc_per_node=2", "--ready"));
  CHECK(cluster.WaitForJobState(id, {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL",
                                     "OUT_OF_MEMORY"}) == "COMPLETED");
  CHECK(cluster.JobField(id, "ExitCode") == "0:0");
  CHECK(cluster.JobField(id, "NodeList") == "n[0-1]");
  const std::string log = ReadFile(cluster.jobs() + "/batch.out");
  INFO(log);
  CHECK(Sorted(IntsAfter(log, "ready rank")) == std::vector<int>{0, 1, 2, 3});
  CHECK(IntsAfter(log, "world") == std::vector<int>(4, 4));
  CHECK(RunIds(log) == std::vector<std::string>(4, "slurm-" + id));
}

#ifdef MXRUN_SLURM_TRAINER_TESTS
TEST_CASE("the example sbatch script runs unchanged on CPU nodes", "[slurm]") {
  SlurmCluster cluster;
  const std::string out = cluster.jobs() + "/train.out";
  ProcessResult r = Run({"sbatch", "--wait", "--output=" + out, "--chdir=" + cluster.jobs(),
                         std::string(SCRIPTS_DIR) + "/slurm/train.sbatch", "--model", "resnet18",
                         "--width", "8", "--epochs", "1", "--synthetic_train", "256",
                         "--synthetic_test", "64", "--batch_size", "32", "--threads", "1"},
                        {{"MXRUN", kMxrun}, {"CKPT_DIR", cluster.jobs() + "/ckpt"}}, 300s);
  const std::string log = ReadFile(out);
  INFO(mxrun::testing::Describe(r) << "\njob output:\n" << log);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(log, Catch::Contains("--nnodes=2") && Catch::Contains("--rdzv_id=slurm-"));
  // One worker per CPU node (CPU_WORKERS=1), two nodes: rank 0 reports for both.
  CHECK_THAT(log, Catch::Contains("on cpu, 2 worker(s), backend gloo") &&
                      Catch::Contains("[n0 r0] train: finished"));
  const std::string job = SubmittedId(r);
  REQUIRE_FALSE(job.empty());
  const std::string metrics = ReadFile(cluster.jobs() + "/metrics-" + job + ".jsonl");
  CHECK_THAT(metrics, Catch::Contains("\"world_size\":2") || Catch::Contains("\"world_size\": 2"));
}

TEST_CASE(
    "the example sbatch script does not requeue a job that failed the same way on every "
    "attempt (exit 93)",
    "[slurm]") {
  SlurmCluster cluster;
  const std::string out = cluster.jobs() + "/same.out";
  // A model the trainer does not know: every attempt fails with the same error.
  ProcessResult r = Run({"sbatch", "--wait", "--output=" + out, "--chdir=" + cluster.jobs(),
                         std::string(SCRIPTS_DIR) + "/slurm/train.sbatch", "--model", "resnet7",
                         "--epochs", "1", "--synthetic_train", "64", "--threads", "1"},
                        {{"MXRUN", kMxrun}, {"CKPT_DIR", cluster.jobs() + "/ckpt"}}, 300s);
  const std::string log = ReadFile(out);
  INFO(mxrun::testing::Describe(r) << "\njob output:\n" << log);
  const std::string job = SubmittedId(r);
  REQUIRE_FALSE(job.empty());
  CHECK_THAT(log, Catch::Contains("every attempt (4 of them) failed the same way"));
  CHECK_THAT(log, Catch::Contains("mxrun exited 93: a requeue would fail the same way; not "
                                  "requeued"));
  CHECK(cluster.JobField(job, "ExitCode") == "93:0");
  CHECK(cluster.JobField(job, "Restarts") == "0");
}
#endif  // MXRUN_SLURM_TRAINER_TESTS

TEST_CASE("the example sbatch script requeues a failure a requeue may fix, up to MAX_REQUEUES",
          "[slurm]") {
  SlurmCluster cluster;
  // mxrun's exit 1 (failed, budget spent) stands in for any retryable failure here: the decision
  // is the script's.
  const std::string fake = cluster.jobs() + "/fake-mxrun";
  std::ofstream(fake) << "#!/bin/sh\necho \"fake mxrun $SLURM_NODEID attempt "
                         "${SLURM_RESTART_COUNT:-0}\"\nexit 1\n";
  REQUIRE(chmod(fake.c_str(), 0755) == 0);
  const std::string out = cluster.jobs() + "/retry.out";
  ProcessResult r =
      Run({"sbatch", "--output=" + out, "--open-mode=append", "--chdir=" + cluster.jobs(),
           std::string(SCRIPTS_DIR) + "/slurm/train.sbatch"},
          {{"MXRUN", fake}, {"MAX_REQUEUES", "1"}}, 30s);
  INFO(mxrun::testing::Describe(r));
  const std::string job = SubmittedId(r);
  REQUIRE_FALSE(job.empty());
  // Requeued once: Slurm holds a requeued job back (BeginTime); start it now, as a busy
  // cluster's scheduler would.
  REQUIRE(WaitForLines(out, "requeueing (1 of 1)", 1));
  bool requeued = false;
  for (int i = 0; i < 600 && !requeued; ++i) {  // up to 60 s
    requeued =
        cluster.JobField(job, "Restarts") == "1" && cluster.JobField(job, "JobState") == "PENDING";
    if (!requeued) std::this_thread::sleep_for(100ms);
  }
  REQUIRE(requeued);
  Run({"scontrol", "update", "JobId=" + job, "StartTime=now"}, {}, 30s);
  CHECK(cluster.WaitForJobState(job, {"COMPLETED", "FAILED", "CANCELLED"}, 120s) == "FAILED");
  const std::string log = ReadFile(out);
  INFO(log);
  CHECK(cluster.JobField(job, "Restarts") == "1");
  CHECK_THAT(log, Catch::Contains("fake mxrun 0 attempt 1"));
  CHECK_THAT(log, Catch::Contains("mxrun exited 1: requeued 1 time(s) already; not again"));
}

TEST_CASE("scancel mid-run: no process of the job is left", "[slurm]") {
  SlurmCluster cluster;
  const std::string id =
      Submit(cluster, "cancel", MxrunChild("--nproc_per_node=2", "--ready --sleep=300"));
  const std::string out = cluster.jobs() + "/cancel.out";
  REQUIRE(WaitForLines(out, "ready rank", 4));
  const std::vector<int> pids = IntsAfter(ReadFile(out), "pid");
  REQUIRE(pids.size() == 4);
  for (int pid : pids) REQUIRE(mxrun::testing::IsAlive(pid));
  REQUIRE_FALSE(cluster.StrayProcesses().empty());
  REQUIRE(Run({"scancel", id}, {}, 30s).exit_code == 0);
  CHECK(cluster.WaitForJobState(id, {"CANCELLED"}) == "CANCELLED");
  // The workers end within KillWait (SIGTERM, then Slurm's SIGKILL), with some slack.
  const auto bound = std::chrono::seconds(2 * SlurmCluster::kKillWaitSeconds + 10);
  for (int pid : pids) CHECK(mxrun::testing::WaitForExit(pid, bound));
  // And nothing else of the job either: no mxrun, no slurmstepd, no sh of the batch script; in
  // the test's own PID namespace everything but the daemons counts.
  const std::vector<std::string> left = cluster.WaitForNoStrays(bound);
  INFO("left: " << absl::StrJoin(left, "\n      "));
  CHECK(left.empty());
  CHECK(cluster.WaitForNoJobs(bound));
}

TEST_CASE(
    "scancel mid-run: each node's mxrun stops its workers within KillWait and says how they "
    "ended",
    "[slurm]") {
  SlurmCluster cluster;
  // Each node's output straight to a file of its own (slurmstepd writes it): what mxrun says as
  // it stops must not depend on srun, which the same scancel ends, forwarding it in time.
  const std::string id =
      Submit(cluster, "cancel",
             "srun --output=" + cluster.jobs() + "/cancel-node%n.log " + kMxrun +
                 " --nproc_per_node=2 --no_python " + kChild + " --ready --sleep=300");
  const std::vector<std::string> logs{cluster.jobs() + "/cancel-node0.log",
                                      cluster.jobs() + "/cancel-node1.log"};
  for (const std::string& log : logs) REQUIRE(WaitForLines(log, "ready rank", 2));
  REQUIRE(Run({"scancel", id}, {}, 30s).exit_code == 0);
  CHECK(cluster.WaitForJobState(id, {"CANCELLED"}) == "CANCELLED");
  // Each node's mxrun fitted its grace inside KillWait and said how its ranks ended.
  for (const std::string& path : logs) {
    const bool said = WaitForLines(path, "cancelled by SIGTERM", 1, 30s);
    const std::string log = ReadFile(path);
    INFO(path << ":\n" << log);
    REQUIRE(said);
    CHECK(CountOccurrences(log, "Slurm's KillWait is " +
                                    std::to_string(SlurmCluster::kKillWaitSeconds) + " s") == 1);
    CHECK(CountOccurrences(log, "; exit code 143") == 1);
  }
}

TEST_CASE("a preemption warning (SIGUSR1) reaches every worker and the job goes on", "[slurm]") {
  SlurmCluster cluster;
  const std::string id = Submit(cluster, "usr1",
                                MxrunChild("--nproc_per_node=2 --signals_to_handle=SIGTERM,SIGUSR1",
                                           "--ready --sleep=300 --report-usr1"));
  const std::string out = cluster.jobs() + "/usr1.out";
  REQUIRE(WaitForLines(out, "ready rank", 4));
  // As `#SBATCH --signal=USR1@60` does before the time limit: the signal to the job's steps.
  REQUIRE(Run({"scancel", "--signal=USR1", id}, {}, 30s).exit_code == 0);
  // Each rank by name: Slurm's proctrack (linuxproc here, cgroup on most clusters) signals every
  // process of the step, so a worker gets the warning from slurmstepd as well as from mxrun, and
  // four lines may come from two ranks (docs/guide/when-something-fails.md, signals).
  for (int rank = 0; rank < 4; ++rank) {
    const std::string line = "got SIGUSR1 rank=" + std::to_string(rank);
    const bool reported = WaitForLines(out, line, 1);
    INFO(ReadFile(out));
    CHECK(reported);
    CHECK(CountOccurrences(ReadFile(out), line) <= 2);
  }
  CHECK(cluster.JobField(id, "JobState") == "RUNNING");
  Run({"scancel", id}, {}, 30s);
  CHECK(cluster.WaitForJobState(id, {"CANCELLED"}) == "CANCELLED");
}

TEST_CASE(
    "two jobs share both nodes, and cancelling one leaves the other to finish with its own "
    "peers",
    "[slurm][isolation]") {
  SlurmCluster cluster;
  const std::string a =
      Submit(cluster, "a", MxrunChild("--nproc_per_node=2", "--ready --sleep=300"));
  const std::string b = Submit(cluster, "b", MxrunChild("--nproc_per_node=2", "--ready --sleep=8"));
  REQUIRE(WaitForLines(cluster.jobs() + "/a.out", "ready rank", 4));
  REQUIRE(WaitForLines(cluster.jobs() + "/b.out", "ready rank", 4));
  CHECK(cluster.JobField(a, "NodeList") == "n[0-1]");
  CHECK(cluster.JobField(b, "NodeList") == "n[0-1]");
  REQUIRE(Run({"scancel", a}, {}, 30s).exit_code == 0);
  CHECK(cluster.WaitForJobState(a, {"CANCELLED"}) == "CANCELLED");
  CHECK(cluster.WaitForJobState(b, {"COMPLETED", "FAILED", "CANCELLED"}) == "COMPLETED");
  const std::string log = ReadFile(cluster.jobs() + "/b.out");
  INFO(log);
  CHECK(Sorted(IntsAfter(log, "ready rank")) == std::vector<int>{0, 1, 2, 3});
  CHECK(IntsAfter(log, "world") == std::vector<int>(4, 4));
  CHECK(RunIds(log) == std::vector<std::string>(4, "slurm-" + b));
}

#ifdef MXRUN_SLURM_TRAINER_TESTS
TEST_CASE("a requeued job resumes from its checkpoint", "[slurm]") {
  SlurmCluster cluster;
  const std::string ckpt = cluster.jobs() + "/ckpt";
  const std::string id =
      Submit(cluster, "requeue",
             "srun " + kMxrun +
                 " train --model resnet18 --width 8 --epochs 6 --synthetic_train 512 "
                 "--synthetic_test 32 --batch_size 32 --threads 1 --resume --ckpt_dir " +
                 ckpt,
             {"--requeue", "--open-mode=append"});
  const std::string out = cluster.jobs() + "/requeue.out";
  // The first epoch's checkpoint, then the requeue (what preemption with requeue does).
  const auto deadline = std::chrono::steady_clock::now() + 180s;
  while (access((ckpt + "/checkpoint.pt").c_str(), F_OK) != 0 &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(100ms);
  }
  REQUIRE(access((ckpt + "/checkpoint.pt").c_str(), F_OK) == 0);
  REQUIRE(Run({"scontrol", "requeue", id}, {}, 30s).exit_code == 0);
  // Slurm holds a requeued batch job back for a while (BeginTime, about two minutes here); let
  // it start as soon as its nodes are free, as a busy cluster's scheduler would anyway, but not
  // within the second of the requeue: each node's slurmd revoked the job's credentials at the
  // requeue's time, in whole seconds, and refuses a launch whose credential is not newer ("Job N
  // already killed, do not launch batch job"), which ends the job FAILED without running again
  // (slurm_cred_revoked: ctime <= revoked). StartTime=now did that once in CI.
  CHECK(cluster.WaitForJobState(id, {"PENDING"}) == "PENDING");
  Run({"scontrol", "update", "JobId=" + id, "StartTime=now+1"}, {}, 30s);
  CHECK(cluster.WaitForJobState(id, {"COMPLETED", "FAILED", "CANCELLED"}, 300s) == "COMPLETED");
  const std::string log = ReadFile(out);
  INFO(log);
  CHECK(cluster.JobField(id, "Restarts") == "1");
  CHECK_THAT(log, Catch::Contains("resumed from the checkpoint"));
}
#endif  // MXRUN_SLURM_TRAINER_TESTS
