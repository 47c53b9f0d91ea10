// Telling an OOM kill from another SIGKILL (agent/process/oom_kills.h), on recorded /proc and
// cgroup texts in a temporary folder.

#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <fstream>
#include <string>

#include "agent/process/oom_kills.h"
#include "common/worker_failure.h"
#include "tests/temp_dir.h"

using mxrun::MemoryCgroupCountFile;
using mxrun::OomKillCounts;
using mxrun::OomKillNote;
using mxrun::ParseOomKillCount;

TEST_CASE("the kernel's OOM kill count is read from vmstat, memory.events and memory.oom_control",
          "[unit][oom]") {
  CHECK(ParseOomKillCount("pgfault 12\noom_kill 3\nnuma_hit 1\n") == 3);
  CHECK(ParseOomKillCount("low 0\nhigh 0\nmax 7\noom 2\noom_kill 2\noom_group_kill 0\n") == 2);
  CHECK(ParseOomKillCount("oom_kill_disable 0\nunder_oom 0\noom_kill 0\n") == 0);
  CHECK(ParseOomKillCount("oom_kill_disable 1\n") == -1);  // another key, not the count
  CHECK(ParseOomKillCount("oom_kill x\n") == -1);
  CHECK(ParseOomKillCount("oom_kill -4\n") == -1);
  CHECK(ParseOomKillCount("") == -1);
}

TEST_CASE("a process's memory cgroup count file: v1's memory hierarchy first, else v2's",
          "[unit][oom]") {
  CHECK(MemoryCgroupCountFile("0::/system.slice/job.service\n", "/cg") ==
        "/cg/system.slice/job.service/memory.events");
  CHECK(MemoryCgroupCountFile("0::/\n", "/cg") == "/cg/memory.events");
  CHECK(MemoryCgroupCountFile("12:pids:/a\n4:memory:/slurm/uid_0/job_7\n0::/x\n", "/cg") ==
        "/cg/memory/slurm/uid_0/job_7/memory.oom_control");
  CHECK(MemoryCgroupCountFile("5:cpu,memory:/k8s/pod:1\n", "/cg") ==
        "/cg/memory/k8s/pod:1/memory.oom_control");
  CHECK(MemoryCgroupCountFile("4:memory:/a/../../etc\n", "/cg").empty());  // never outside
  CHECK(MemoryCgroupCountFile("4:pids:/a\n", "/cg").empty());
  CHECK(MemoryCgroupCountFile("garbage", "/cg").empty());
}

TEST_CASE("an OOM kill is named when its cgroup's count rose, likely when the machine's alone",
          "[unit][oom]") {
  OomKillCounts start{10, 0, "/cg/memory.events"};
  CHECK(OomKillNote(start, {11, 1, "/cg/memory.events"}) ==
        "killed by the kernel's OOM killer (its memory cgroup counted 1 OOM kill(s) while it ran)");
  CHECK(OomKillNote(start, {12, 0, "/cg/memory.events"}) ==
        "killed by the kernel's OOM killer, most likely (the machine counted 2 OOM kill(s) while "
        "it ran)");
  CHECK(OomKillNote(start, start).empty());
  CHECK(OomKillNote({-1, -1, ""}, {5, 5, ""}).empty());  // nothing known at the start

  mxrun::WorkerFailure killed;
  killed.term_signal = 9;
  killed.oom_kill = OomKillNote(start, {11, 1, ""});
  CHECK(mxrun::DescribeExit(killed) ==
        "Signal 9 (SIGKILL), killed by the kernel's OOM killer (its memory cgroup counted 1 OOM "
        "kill(s) while it ran)");
}

TEST_CASE("the counts are read from a process's cgroup at its start and the same files after",
          "[unit][oom]") {
  mxrun::testing::TempDir dir;
  const std::string proc = dir.path() + "/proc";
  const std::string cg = dir.path() + "/cg";
  for (const std::string& folder : {proc, proc + "/42", cg, cg + "/memory", cg + "/memory/job"}) {
    REQUIRE(::mkdir(folder.c_str(), 0755) == 0);
  }
  std::ofstream(proc + "/vmstat") << "oom_kill 5\n";
  std::ofstream(proc + "/42/cgroup") << "4:memory:/job\n0::/\n";
  std::ofstream(cg + "/memory/job/memory.oom_control") << "oom_kill_disable 0\noom_kill 1\n";
  const OomKillCounts start = mxrun::ReadOomKillCounts(42, proc, cg);
  CHECK(start.machine == 5);
  CHECK(start.cgroup == 1);
  CHECK(start.cgroup_file == cg + "/memory/job/memory.oom_control");
  std::ofstream(proc + "/vmstat") << "oom_kill 6\n";
  std::ofstream(cg + "/memory/job/memory.oom_control") << "oom_kill 2\n";
  const OomKillCounts death = mxrun::ReadOomKillCountsAgain(start, proc);
  CHECK(death.machine == 6);
  CHECK(death.cgroup == 2);
}
