// In-process restart at the agent: workers that declare it on their control channel
// (common/control_protocol.h) are kept through a re-formed group and told their new round; only
// the ranks nobody holds get new processes. Workers that do not declare it (any ordinary program)
// are stopped and started again as before, and so is a kept worker that cannot take the round.
// Real mxrun processes and the test_child program; the bundled trainer's side is in
// trainer_run_test.cc.

#include <catch2/catch.hpp>

#include <sched.h>
#include <signal.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "tests/subprocess.h"
#include "tests/temp_dir.h"

using mxrun::testing::CountOccurrences;
using mxrun::testing::IntsAfter;
using mxrun::testing::ProcessResult;
using mxrun::testing::Run;
using mxrun::testing::Subprocess;
using namespace std::chrono_literals;
using mxrun::testing::TempDir;

namespace {

std::vector<std::string> Mxrun(std::vector<std::string> flags,
                               std::vector<std::string> child_args) {
  return mxrun::testing::MxrunWithChild(flags, child_args);
}

// rank -> the pids its "ready" lines reported, in order.
std::map<int, std::vector<int>> ReadyPids(const std::string& out) {
  std::map<int, std::vector<int>> pids;
  size_t at = 0;
  while ((at = out.find("ready rank=", at)) != std::string::npos) {
    const size_t end = out.find('\n', at);
    const std::string line = out.substr(at, end - at);
    pids[IntsAfter(line, "rank")[0]].push_back(IntsAfter(line, " pid")[0]);
    at = end;
  }
  return pids;
}

// Runs mxrun over test_child with `child_args`, which hold --fail-on-signal: once `ready` ranks
// have printed "ready" (and `also`, when given, is on stderr), the failing rank `failing` is let
// go with SIGUSR1; then waits for the end.
ProcessResult RunReleasingFailure(const std::vector<std::string>& flags,
                                  const std::vector<std::string>& child_args, int ready,
                                  int failing, const std::string& also = "",
                                  const std::map<std::string, std::string>& env = {}) {
  Subprocess job(Mxrun(flags, child_args), env);
  REQUIRE(job.WaitForStdout("ready rank=", ready, 30s));
  if (!also.empty()) REQUIRE(job.WaitForStderr(also, 1, 30s));
  REQUIRE(::kill(ReadyPids(job.out()).at(failing).at(0), SIGUSR1) == 0);
  return job.Wait(60s);
}

// Every number that follows `prefix` in `text` (a word that is not a number gives -1).
std::vector<double> NumbersAfter(const std::string& text, const std::string& prefix) {
  std::vector<double> values;
  for (size_t at = text.find(prefix); at != std::string::npos;
       at = text.find(prefix, at + prefix.size())) {
    const char* begin = text.c_str() + at + prefix.size();
    char* end = nullptr;
    const double value = std::strtod(begin, &end);
    values.push_back(end == begin ? -1 : value);
  }
  return values;
}

// Every one of `ranks` ranks printed "ready" twice, from two processes.
void CheckEveryRankStartedTwice(const std::string& out, int ranks) {
  const auto pids = ReadyPids(out);
  for (int rank = 0; rank < ranks; ++rank) {
    INFO("rank " << rank);
    REQUIRE(pids.at(rank).size() == 2);
    CHECK(pids.at(rank)[0] != pids.at(rank)[1]);
  }
}

}  // namespace

TEST_CASE(
    "workers that declare in-process restart keep their processes, only the failed rank "
    "starts again",
    "[integration][in_process]") {
  ProcessResult r =
      RunReleasingFailure({"--standalone", "--nproc_per_node=3", "--max_restarts=1"},
                          {"--keep", "--wait-notice", "--ready", "--exit=3", "--only-rank=1",
                           "--fail-below-attempt=1", "--fail-on-signal"},
                          3, 1);
  INFO(r.err << r.out);
  REQUIRE(r.exit_code == 0);
  const auto pids = ReadyPids(r.out);
  REQUIRE(pids.at(0).size() == 1);
  REQUIRE(pids.at(2).size() == 1);
  REQUIRE(pids.at(1).size() == 2);
  CHECK(pids.at(1)[0] != pids.at(1)[1]);
  // The summary times it as an in-process restart (test_child sends no progress: no first step).
  CHECK_THAT(r.err, Catch::Contains("in-process restart 1 (round 1; rank 1 failed: exit code 3): "
                                    "stop ") &&
                        Catch::Contains("first step unknown (no progress reports)"));
  // The kept workers were told round 1 with their own ranks and the spent restart.
  for (int rank : {0, 2}) {
    const std::string pid = std::to_string(pids.at(rank)[0]);
    CHECK_THAT(r.out, Catch::Contains("notice round=1 rank=" + std::to_string(rank) +
                                      " pid=" + pid + " restart=1"));
  }
  CHECK_THAT(r.err, Catch::Contains("keeping the workers that take the next round in-process"));
  CHECK_THAT(r.err, Catch::Contains("in-process restart: kept rank(s) 0 (pid " +
                                    std::to_string(pids.at(0)[0]) + "), 2 (pid " +
                                    std::to_string(pids.at(2)[0]) + "); started rank(s) 1 (pid " +
                                    std::to_string(pids.at(1)[1]) + ")"));
}

TEST_CASE("ordinary workers are all stopped and started again", "[integration][in_process]") {
  ProcessResult r =
      RunReleasingFailure({"--standalone", "--nproc_per_node=3", "--max_restarts=1"},
                          {"--ready", "--sleep=30", "--sleep-below-attempt=1", "--exit=3",
                           "--only-rank=1", "--fail-below-attempt=1", "--fail-on-signal"},
                          3, 1);
  INFO(r.err << r.out);
  REQUIRE(r.exit_code == 0);
  CheckEveryRankStartedTwice(r.out, 3);
  CHECK(CountOccurrences(r.out, "caught SIGTERM") == 2);  // ranks 0 and 2, stopped as before
  CHECK_THAT(r.err, !Catch::Contains("in-process"));
}

TEST_CASE("a kept worker that cannot take the new round is restarted the old way",
          "[integration][in_process]") {
  ProcessResult r =
      RunReleasingFailure({"--standalone", "--nproc_per_node=3", "--max_restarts=2"},
                          {"--keep=exit", "--wait-notice", "--ready", "--exit=3", "--only-rank=1",
                           "--fail-below-attempt=1", "--fail-on-signal"},
                          3, 1);
  INFO(r.err << r.out);
  REQUIRE(r.exit_code == 0);
  // Round 1 kept ranks 0 and 2, which then gave up (exit 5): that failure spent the second
  // restart, and round 2 started every rank afresh (the rank-1 process of round 1 declared
  // nothing, so nobody could be kept).
  CHECK(CountOccurrences(r.out, "cannot recover") == 2);
  CHECK_THAT(r.err, Catch::Contains("failed: exit code 5"));
  CHECK(CountOccurrences(r.err, "restarting the worker group") == 2);
  const auto pids = ReadyPids(r.out);
  REQUIRE(pids.at(0).size() == 2);
  CHECK(pids.at(0)[0] != pids.at(0)[1]);
  // Rank 1: its first process, maybe round 1's (stopped at once, perhaps before it printed),
  // and round 2's.
  CHECK(pids.at(1).size() >= 2);
}

// SIGSTOPs `stopped` (once it is in state T), then lets rank `failing` of `job` fail.
void StopThenReleaseFailure(const Subprocess& job, pid_t stopped, int failing) {
  REQUIRE(::kill(stopped, SIGSTOP) == 0);
  REQUIRE(mxrun::testing::BecomesStopped(stopped));
  REQUIRE(::kill(ReadyPids(job.out()).at(failing).at(0), SIGUSR1) == 0);
}

TEST_CASE("a worker stopped (SIGSTOP) beside the one that failed is started again and not kept",
          "[integration][in_process]") {
  Subprocess job(Mxrun({"--standalone", "--nproc_per_node=3", "--max_restarts=1"},
                       {"--keep", "--wait-notice", "--ready", "--exit=3", "--only-rank=1",
                        "--fail-below-attempt=1", "--fail-on-signal"}));
  REQUIRE(job.WaitForStdout("ready rank=", 3, 30s));
  const pid_t stopped = ReadyPids(job.out()).at(2).at(0);
  StopThenReleaseFailure(job, stopped, 1);
  ProcessResult r = job.Wait(60s);
  INFO(r.err << r.out);
  REQUIRE(r.exit_code == 0);
  // Kept, it would have held round 1 until judged hung (no --hang_timeout here: for ever).
  CHECK_THAT(r.err, Catch::Contains("worker rank 2 (local_rank 2, pid " + std::to_string(stopped) +
                                    ") is in state T (stopped"));
  const auto pids = ReadyPids(r.out);
  REQUIRE(pids.at(0).size() == 1);
  REQUIRE(pids.at(1).size() == 2);
  REQUIRE(pids.at(2).size() == 2);
  CHECK(pids.at(2)[1] != stopped);
  // Continued with its SIGTERM, it ended on it, within its grace.
  CHECK_THAT(r.out, Catch::Contains("caught SIGTERM rank=2"));
  CHECK_THAT(r.err, !Catch::Contains("sending SIGKILL"));
  CHECK_THAT(r.err, Catch::Contains("in-process restart: kept rank(s) 0 (pid " +
                                    std::to_string(pids.at(0)[0]) + "); started rank(s) 1 (pid " +
                                    std::to_string(pids.at(1)[1]) + "), 2 (pid " +
                                    std::to_string(pids.at(2)[1]) + ")"));
}

TEST_CASE("a worker's control channel is fd 3, a socket, and nothing else is inherited",
          "[integration][in_process]") {
  // A shell worker reports what fd 3 is and which fds it holds (ls of its own fd folder).
  ProcessResult r = Run({MXRUN_BIN, "--standalone", "--nproc_per_node=1", "--no_python", "sh", "-c",
                         "echo fd3=$(readlink /proc/$$/fd/3 | cut -d: -f1) "
                         "var=$MXRUN_CONTROL_FD fds=$(ls /proc/$$/fd | sort -n | tr '\\n' ,)"});
  INFO(r.err << r.out);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("fd3=socket var=3 fds=0,1,2,3,"));
}

TEST_CASE("a warm standby takes the failed rank", "[integration][in_process]") {
  // Rank 1 fails once the standby (started when every worker joined) has said hello.
  ProcessResult r = RunReleasingFailure(
      {"--standalone", "--nproc_per_node=2", "--max_restarts=1", "--standby_workers=1"},
      {"--keep", "--wait-notice", "--ready", "--exit=3", "--only-rank=1", "--fail-below-attempt=1",
       "--fail-on-signal"},
      2, 1, "ready to take a rank in-process");
  INFO(r.err << r.out);
  REQUIRE(r.exit_code == 0);
  const size_t at = r.err.find("standby worker started (pid ");
  REQUIRE(at != std::string::npos);
  const std::vector<int> standby = {std::atoi(r.err.c_str() + at + 28)};
  CHECK_THAT(r.err, Catch::Contains("standby worker (pid " + std::to_string(standby[0]) +
                                    "): ready to take a rank in-process"));
  CHECK_THAT(r.err, Catch::Contains("; started rank(s) 1 (standby pid " +
                                    std::to_string(standby[0]) + ")"));
  CHECK_THAT(r.out, Catch::Contains("standby promoted rank=1 pid=" + std::to_string(standby[0])));
  // Rank 1 started once as a process of its own; the standby took its place without a start.
  CHECK(ReadyPids(r.out).at(1).size() == 1);
}

// The standby starts with the workers and is still preparing (it waits for `hold`) when rank 1
// fails; the job, its pid and the in-process restart's line naming it.
struct LossBeforeStandbyReady {
  TempDir dir;
  std::string hold = dir.path() + "/hold";
  Subprocess job{
      Mxrun({"--standalone", "--nproc_per_node=2", "--max_restarts=1", "--standby_workers=1"},
            {"--keep", "--wait-notice", "--ready", "--exit=3", "--only-rank=1",
             "--fail-below-attempt=1", "--fail-on-signal", "--standby-hold=" + hold})};
  pid_t standby = -1;

  void FailRankOne() {
    REQUIRE(job.WaitForStdout("ready rank=", 2, 30s));
    REQUIRE(job.WaitForStdout("standby preparing pid=", 1, 30s));
    const std::string out = job.out();
    standby = std::atoi(out.c_str() + out.find("standby preparing pid=") + 22);
    REQUIRE(standby > 0);
    REQUIRE(::kill(ReadyPids(out).at(1).at(0), SIGUSR1) == 0);
    REQUIRE(job.WaitForStderr(
        "; started rank(s) 1 (standby pid " + std::to_string(standby) + ", once it is ready)", 1,
        30s));
  }
};

TEST_CASE("a rank lost while the standby still prepares waits for it, not for a cold process",
          "[integration][in_process]") {
  LossBeforeStandbyReady loss;
  loss.FailRankOne();
  // Waiting: no process of its own for rank 1 yet (its first one failed).
  CHECK(ReadyPids(loss.job.out()).at(1).size() == 1);
  std::ofstream(loss.hold).put('\n');
  ProcessResult r = loss.job.Wait(60s);
  INFO(r.err << r.out);
  REQUIRE(r.exit_code == 0);
  const std::string pid = std::to_string(loss.standby);
  CHECK_THAT(r.err, Catch::Contains("round 1: rank 1 went to 1 (standby pid " + pid +
                                    ") once it was ready"));
  CHECK_THAT(r.out, Catch::Contains("standby promoted rank=1 pid=" + pid));
  CHECK(ReadyPids(r.out).at(1).size() == 1);
}

TEST_CASE("a rank that waits for a preparing standby goes to a new process when the standby dies",
          "[integration][in_process]") {
  LossBeforeStandbyReady loss;
  loss.FailRankOne();
  REQUIRE(::kill(loss.standby, SIGKILL) == 0);
  ProcessResult r = loss.job.Wait(60s);
  INFO(r.err << r.out);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.err, Catch::Contains("round 1: the standby (pid " + std::to_string(loss.standby) +
                                    ") that rank 1 waited for ended: a new process takes the "
                                    "rank"));
  const auto pids = ReadyPids(r.out);
  REQUIRE(pids.at(1).size() == 2);
  CHECK_THAT(r.err, Catch::Contains("round 1: started rank 1 (pid " +
                                    std::to_string(pids.at(1)[1]) + ")"));
  CHECK_THAT(r.out, !Catch::Contains("standby promoted"));
}

TEST_CASE("a stopped standby (SIGSTOP) is not given the failed rank: a new process takes it",
          "[integration][in_process]") {
  Subprocess job(
      Mxrun({"--standalone", "--nproc_per_node=2", "--max_restarts=1", "--standby_workers=1"},
            {"--keep", "--wait-notice", "--ready", "--exit=3", "--only-rank=1",
             "--fail-below-attempt=1", "--fail-on-signal"}));
  REQUIRE(job.WaitForStdout("ready rank=", 2, 30s));
  REQUIRE(job.WaitForStderr("ready to take a rank in-process", 1, 30s));
  const std::string err = job.err();
  const size_t at = err.find("standby worker started (pid ");
  REQUIRE(at != std::string::npos);
  const pid_t standby = std::atoi(err.c_str() + at + 28);
  StopThenReleaseFailure(job, standby, 1);
  ProcessResult r = job.Wait(60s);
  INFO(r.err << r.out);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.err, Catch::Contains("standby worker (pid " + std::to_string(standby) +
                                    ") is in state T (stopped"));
  const auto pids = ReadyPids(r.out);
  REQUIRE(pids.at(1).size() == 2);
  CHECK_THAT(r.err,
             Catch::Contains("; started rank(s) 1 (pid " + std::to_string(pids.at(1)[1]) + ")"));
  CHECK_THAT(r.out, !Catch::Contains("standby promoted"));
}

TEST_CASE("a promoted standby is pinned to its rank's CPUs (numa binding)",
          "[integration][in_process][numa]") {
  // Two NUMA nodes of one CPU each, one GPU on each (tests/topologies/): rank 1 runs on CPU 1.
  cpu_set_t own;
  REQUIRE(sched_getaffinity(0, sizeof own, &own) == 0);
  if (!CPU_ISSET(0, &own) || !CPU_ISSET(1, &own)) {
    WARN("this machine does not let the test use CPUs 0 and 1: skipped");
    return;
  }
  ProcessResult r =
      RunReleasingFailure({"--standalone", "--nproc_per_node=2", "--max_restarts=1",
                           "--standby_workers=1", "--numa-binding=node"},
                          {"--keep", "--wait-notice", "--ready", "--exit=3", "--only-rank=1",
                           "--fail-below-attempt=1", "--fail-on-signal"},
                          2, 1, "ready to take a rank in-process",
                          {{"HWLOC_XMLFILE", std::string(TOPOLOGIES_DIR) + "/two_cpu_2gpu.xml"}});
  INFO(r.err << r.out);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.err, Catch::Contains("local rank 1 (GPU 0000:9a:00.0) -> CPUs 1"));
  CHECK_THAT(r.out, Catch::Matches("(.|\n)*standby promoted rank=1 pid=\\d+ cpus=1\n(.|\n)*"));
}

TEST_CASE("a bad standby worker count is refused", "[integration][in_process]") {
  ProcessResult r = Run(Mxrun({"--standalone", "--standby_workers=-1"}, {}));
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Catch::Contains("--standby_workers"));
  CHECK_THAT(r.err, Catch::Contains("an integer from 0 to 64"));
}

TEST_CASE("ordinary Python workers are stopped and started again, as under torchrun",
          "[integration][in_process]") {
  // A plain Python script that never touches fd 3: rank 1 fails in the first attempt (once the
  // test lets it, when both ranks are up) while rank 0 works on; both come back as new processes.
  TempDir dir;
  const std::string script = dir.path() + "/worker.py";
  {
    std::ofstream out(script);
    out << "import os, signal, sys, time\n"
           "signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGUSR1])\n"
           "rank, attempt = os.environ['RANK'], os.environ['TORCHELASTIC_RESTART_COUNT']\n"
           "failure = os.environ.get('MXRUN_FAILURE_TIME', 'none')\n"
           "print(f'ready rank={rank} pid={os.getpid()} attempt={attempt} failure={failure}',\n"
           "      flush=True)\n"
           "if attempt == '0':\n"
           "    if rank == '1':\n"
           "        signal.sigtimedwait([signal.SIGUSR1], 60)\n"
           "        sys.exit(3)\n"
           "    time.sleep(60)\n";
  }
  Subprocess job({MXRUN_BIN, "--standalone", "--nproc_per_node=2", "--max_restarts=1", script},
                 {{"PYTHON_EXEC", PYTHON_BIN}});
  REQUIRE(job.WaitForStdout("ready rank=", 2, 60s));
  REQUIRE(::kill(ReadyPids(job.out()).at(1).at(0), SIGUSR1) == 0);
  ProcessResult r = job.Wait(120s);
  INFO(r.err << r.out);
  REQUIRE(r.exit_code == 0);
  CheckEveryRankStartedTwice(r.out, 2);
  CHECK_THAT(r.err, Catch::Contains("stopping the group"));
  CHECK_THAT(r.err, !Catch::Contains("in-process"));
  // The restarted processes are told when the failure was seen (for their recovery accounting);
  // the first ones are not.
  CHECK(CountOccurrences(r.out, "attempt=0 failure=none") == 2);
  const double now =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  const std::vector<double> seen = NumbersAfter(r.out, "attempt=1 failure=");
  CHECK(seen.size() == 2);
  for (const double time : seen) {
    CHECK(time > now - 120);
    CHECK(time <= now);
  }
}
