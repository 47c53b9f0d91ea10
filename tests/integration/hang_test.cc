// Hung workers found, explained and recovered from, end to end with real processes: the exit
// barrier, heartbeats (shell workers, a stopped worker), PyTorch's own FileTimer watchdog (Debian's
// PyTorch, unchanged torch.distributed.elastic.timer code), the diagnostics, restarts, and a hang
// on one node of a two-node job. Every wait is bounded; timeouts are short so that hangs are found
// fast.

#include <catch2/catch.hpp>

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <regex>

#include "rendezvous/net.h"
#include "tests/master.h"
#include "tests/subprocess.h"

using namespace std::chrono_literals;
using mxrun::testing::CountOccurrences;
using mxrun::testing::Describe;
using mxrun::testing::IsAlive;
using mxrun::testing::Master;
using mxrun::testing::ProcessResult;
using mxrun::testing::ReadFile;
using mxrun::testing::Run;
using mxrun::testing::Subprocess;
using mxrun::testing::TempDir;

namespace {

const std::string kMxrun = MXRUN_BIN;
const std::string kFileTimerWorker = std::string(EXAMPLES_DIR) + "/file_timer.py";

std::vector<std::string> Mxrun(std::vector<std::string> flags,
                               std::vector<std::string> child_args) {
  return mxrun::testing::MxrunWithChild(flags, child_args);
}

// mxrun running a shell worker.
std::vector<std::string> MxrunShell(std::vector<std::string> flags, const std::string& script) {
  std::vector<std::string> argv{kMxrun};
  argv.insert(argv.end(), flags.begin(), flags.end());
  for (const char* arg : {"--no_python", "/bin/sh", "-c"}) argv.push_back(arg);
  argv.push_back(script);
  return argv;
}

// The diagnostics folder the summary names.
std::string DiagnosticsDir(const std::string& err) {
  std::smatch m;
  REQUIRE(std::regex_search(err, m, std::regex("diagnostics: (\\S+) \\(on that host\\)")));
  return m[1];
}

std::map<std::string, std::string> WithFileTimer(const TempDir& tmp) {
  return {
      {"TORCHELASTIC_ENABLE_FILE_TIMER", "1"}, {"PYTHON_EXEC", PYTHON_BIN}, {"TMPDIR", tmp.path()}};
}

}  // namespace

TEST_CASE("exit barrier: a rank still running after its peers exited 0 is hung and explained",
          "[integration][hang]") {
  TempDir logs;
  ProcessResult r =
      Run(Mxrun({"--nproc_per_node=3", "--exit_barrier_timeout=1", "--log_dir=" + logs.path()},
                {"--hang-rank=2"}),
          {}, 60s);
  INFO(Describe(r));
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.err, Catch::Contains("rank       : 2 (local_rank: 2)"));
  // The silence is measured (1.0 s, or a little more on a busy machine); the rule and its flag are
  // fixed.
  CHECK(std::regex_search(r.err, std::regex("exit       : hung \\(exit barrier\\): still running "
                                            "1\\.[0-9] s after rank [01] exited 0 "
                                            "\\(--exit_barrier_timeout=1\\.0 s\\)")));
  CHECK_THAT(r.out, Catch::Contains("[n0 r2] caught SIGTERM rank=2"));  // stopped with its grace
  // Diagnostics in the log folder, naming the hung rank and its state.
  const std::string dir = DiagnosticsDir(r.err);
  CHECK_THAT(dir, Catch::StartsWith(logs.path()) && Catch::Contains("/attempt_0/hang-"));
  const std::string report = ReadFile(dir + "/rank2.txt");
  CHECK_THAT(report, Catch::Contains("rank         : 2 (local_rank 2)"));
  CHECK_THAT(report, Catch::Contains("rule         : exit barrier"));
  CHECK_THAT(report, Catch::Contains("state        : S (sleeping)"));
  CHECK_THAT(report, Catch::Contains("hanging rank=2"));  // its last output lines
  CHECK_THAT(r.err, Catch::Contains("hang state :\n      rank 2 (pid "));
}

TEST_CASE("exit barrier: the restart after a hang succeeds, no log folder keeps the report",
          "[integration][hang]") {
  TempDir tmp;
  ProcessResult r =
      Run(Mxrun({"--nproc_per_node=2", "--max_restarts=1", "--exit_barrier_timeout=1"},
                {"--hang-rank=0", "--hang-below-attempt=1", "--ready"}),
          {{"TMPDIR", tmp.path()}}, 60s);
  INFO(Describe(r));
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.err, Catch::Contains("worker rank 0 (local_rank 0, pid "));
  CHECK_THAT(r.err, Catch::Contains("is hung (exit barrier)"));
  CHECK_THAT(r.err, Catch::Contains("restarting the worker group (1 of 1 restarts)"));
  CHECK(CountOccurrences(r.out, "attempt=1") == 2);
  // Without --log_dir the report goes to a folder of its own under TMPDIR, kept after exit.
  std::smatch m;
  REQUIRE(std::regex_search(r.err, m, std::regex("written to (\\S+) in")));
  CHECK_THAT(std::string(m[1]), Catch::StartsWith(tmp.path() + "/mxrun-hang-"));
  CHECK_THAT(ReadFile(std::string(m[1]) + "/rank0.txt"),
             Catch::Contains("rule         : exit barrier"));
}

TEST_CASE("heartbeat: a shell worker that stops beating is hung, beating or never beating is not",
          "[integration][hang]") {
  SECTION("stops beating; its NCCL flight-recorder dump is kept with the diagnostics") {
    TempDir logs;
    // The worker also writes a dump where PyTorch's flight recorder would (prefix + rank).
    ProcessResult r = Run(MxrunShell({"--hang_timeout=1", "--log_dir=" + logs.path()},
                                     "touch \"$MXRUN_HEARTBEAT_FILE\"; echo beat once; "
                                     "echo trace > \"${TORCH_NCCL_DEBUG_INFO_TEMP_FILE}${RANK}\"; "
                                     "exec sleep 600"),
                          {{"TORCH_NCCL_DEBUG_INFO_TEMP_FILE", ""}}, 60s);
    INFO(Describe(r));
    CHECK(r.exit_code == 1);
    CHECK(std::regex_search(r.err, std::regex("exit       : hung \\(heartbeat\\): no heartbeat for "
                                              "1\\.[0-9] s \\(--hang_timeout=1\\.0 s\\)")));
    CHECK(std::regex_search(r.err, std::regex("last heartbeat 1\\.[0-9] s ago")));
    CHECK_THAT(r.err, Catch::Contains("NCCL flight recorder: 1 dump(s) copied"));
    CHECK(ReadFile(DiagnosticsDir(r.err) + "/nccl_trace_rank_0") == "trace\n");
  }
  SECTION("keeps beating") {
    ProcessResult r =
        Run(MxrunShell({"--hang_timeout=1"},
                       "for i in 1 2 3 4 5 6 7 8; do touch \"$MXRUN_HEARTBEAT_FILE\"; "
                       "sleep 0.25; done; echo finished"),
            {}, 60s);
    INFO(Describe(r));
    CHECK(r.exit_code == 0);
    CHECK_THAT(r.out, Catch::Contains("finished"));
  }
  SECTION("never beats: no heartbeat, no rule") {
    ProcessResult r = Run(MxrunShell({"--hang_timeout=0.3"}, "sleep 1.5; echo finished"), {}, 60s);
    INFO(Describe(r));
    CHECK(r.exit_code == 0);
    CHECK_THAT(r.err, !Catch::Contains("hung"));
  }
}

TEST_CASE("a SIGSTOPped worker is reported as stopped, named first, and stopped at once",
          "[integration][hang]") {
  ProcessResult r = Run(Mxrun({"--nproc_per_node=2", "--hang_timeout=1"},
                              {"--beat", "--hang-rank=1", "--stop-self", "--sleep=30"}),
                        {}, 60s);
  INFO(Describe(r));
  CHECK(r.exit_code == 1);
  // Both ranks went silent; the stopped one is the root cause.
  CHECK_THAT(r.err, Catch::Contains("rank       : 1 (local_rank: 1)"));
  CHECK_THAT(r.err, Catch::Contains("T (stopped: SIGSTOP, SIGTSTP or a debugger)"));
  CHECK_THAT(r.err, Catch::Contains("main thread waits in do_signal_stop"));
  // SIGCONT after SIGTERM: it handles the stop signal instead of holding its whole grace period.
  CHECK_THAT(r.out, Catch::Contains("[n0 r1] caught SIGTERM rank=1"));
  CHECK(r.elapsed < 25s);
}

TEST_CASE("FileTimer: PyTorch's timers released in time do nothing, a bad line is ignored",
          "[integration][hang][file_timer]") {
  TempDir tmp;
  ProcessResult r =
      Run({kMxrun, "--nproc_per_node=2", kFileTimerWorker, "--bad_line"}, WithFileTimer(tmp), 120s);
  INFO(Describe(r));
  CHECK(r.exit_code == 0);
  CHECK(CountOccurrences(r.out, "released a timer in time") == 2);
  CHECK_THAT(r.err, Catch::Contains("FileTimer: ignored a request ('pid' must be a process id"));
  CHECK_THAT(r.err, !Catch::Contains("hung"));
}

TEST_CASE("FileTimer: an expired timer kills its worker and the group restarts",
          "[integration][hang][file_timer]") {
  TempDir tmp;
  ProcessResult r = Run({kMxrun, "--nproc_per_node=2", "--max_restarts=1", kFileTimerWorker,
                         "--hang_rank", "1", "--expire_after", "1"},
                        WithFileTimer(tmp), 120s);
  INFO(Describe(r));
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.err, Catch::Contains("is hung (FileTimer): timer 'stuck step' of pid "));
  CHECK_THAT(r.err, Catch::Contains("(1.0 s after it was set; its signal: SIGKILL)"));
  CHECK_THAT(r.err, Catch::Contains("restarting the worker group (1 of 1 restarts)"));
  CHECK(CountOccurrences(r.out, "rank 1: done") == 1);  // after the restart
}

TEST_CASE("FileTimer: with the budget spent the summary names the timer and the signal",
          "[integration][hang][file_timer]") {
  TempDir tmp;
  std::map<std::string, std::string> env = WithFileTimer(tmp);
  const std::string dumper = GENERATE(std::string("eu-stack"), std::string("gdb"));
  env["MXRUN_STACK_DUMPER"] = dumper;
  ProcessResult r = Run(
      {kMxrun, "--nproc_per_node=1", kFileTimerWorker, "--hang_rank", "0", "--expire_after", "0.5"},
      env, 120s);
  INFO(Describe(r));
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.err, Catch::Contains("exit       : hung (FileTimer): timer 'stuck step' of pid "));
  CHECK_THAT(r.err, Catch::Contains(", then Signal 9 (SIGKILL)"));
  // The dump was taken before the kill, of a live interpreter.
  CHECK_THAT(r.err, Catch::Contains("stack (" + dumper + "): ") &&
                        Catch::Contains("_PyEval_EvalFrameDefault"));
}

TEST_CASE("MXRUN_STACK_DUMPER must name a known tool", "[integration][hang]") {
  ProcessResult r = Run(Mxrun({}, {}), {{"MXRUN_STACK_DUMPER", "lldb"}}, 30s);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Catch::Contains("MXRUN_STACK_DUMPER='lldb' is not valid; accepted: py-spy, "
                                    "eu-stack, gdb, none"));
}

TEST_CASE("FileTimer: a pid that is not one of the agent's workers is never signalled",
          "[integration][hang][file_timer]") {
  TempDir tmp;
  const std::string pipe = tmp.path() + "/timer";
  Subprocess victim({"/bin/sleep", "60"});
  std::map<std::string, std::string> env = WithFileTimer(tmp);
  env["TORCHELASTIC_TIMER_FILE"] = pipe;
  Subprocess job(Mxrun({"--nproc_per_node=1"}, {"--ready", "--sleep=60"}), env);
  REQUIRE(job.WaitForStdout("ready rank=0", 1, 30s));
  struct stat st {};
  REQUIRE(stat(pipe.c_str(), &st) == 0);
  CHECK(S_ISFIFO(st.st_mode));
  const std::string line =
      "{\"version\": 1, \"pid\": " + std::to_string(victim.pid()) +
      ", \"scope_id\": \"foreign\", \"expiration_time\": 1.0, \"signal\": 9}\n";
  int fd = open(pipe.c_str(), O_WRONLY | O_NONBLOCK);
  REQUIRE(fd >= 0);
  REQUIRE(write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size()));
  close(fd);
  // The expired timer was read and refused (not merely left unread): then the job is stopped.
  const std::string refused = "ignored a request from pid " + std::to_string(victim.pid());
  CHECK(job.WaitForStderr(refused, 1, 30s));
  kill(job.pid(), SIGTERM);
  ProcessResult r = job.Wait(60s);
  INFO(Describe(r));
  CHECK(r.exit_code == 128 + SIGTERM);
  CHECK(IsAlive(victim.pid()));
  CHECK(access(pipe.c_str(), F_OK) != 0);  // the pipe is removed at exit
}

TEST_CASE("FileTimer: a path that is not a pipe is a usage error and is left alone",
          "[integration][hang][file_timer]") {
  TempDir tmp;
  const std::string file = tmp.path() + "/notes.txt";
  std::ofstream(file) << "keep me\n";
  std::map<std::string, std::string> env = WithFileTimer(tmp);
  env["TORCHELASTIC_TIMER_FILE"] = file;
  ProcessResult r = Run(Mxrun({}, {}), env, 30s);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Catch::Contains("exists and is not a named pipe"));
  CHECK(ReadFile(file) == "keep me\n");
}

TEST_CASE("a hang on node 1 of a 2-node job restarts both nodes",
          "[integration][hang][multinode]") {
  absl::StatusOr<int> port = mxrun::PickFreePort("127.0.0.1");
  REQUIRE(port.ok());
  std::vector<std::unique_ptr<Subprocess>> nodes;
  for (int rank : {0, 1}) {
    nodes.push_back(std::make_unique<Subprocess>(
        Mxrun({"--nnodes=2", "--node_rank=" + std::to_string(rank),
               "--master_port=" + std::to_string(*port), "--nproc_per_node=2", "--max_restarts=1",
               "--hang_timeout=1"},
              {"--beat", "--ready", "--hang-rank=3", "--hang-below-attempt=1", "--sleep=0.3"})));
  }
  ProcessResult n0 = nodes[0]->Wait(90s);
  ProcessResult n1 = nodes[1]->Wait(90s);
  INFO(Describe(n0) << Describe(n1));
  CHECK(n0.exit_code == 0);
  CHECK(n1.exit_code == 0);
  CHECK_THAT(n1.err, Catch::Contains("worker rank 3 (local_rank 1, pid "));
  CHECK_THAT(n1.err, Catch::Contains("is hung (heartbeat)"));
  // Node 0 learns the cause from the master and restarts too.
  CHECK_THAT(n0.err, Catch::Contains("restarting the worker group (1 of 1 restarts): worker rank 3 "
                                     "on ") &&
                         Catch::Contains("failed (hung (heartbeat)"));
  CHECK(CountOccurrences(n0.out + n1.out, "attempt=1") == 4);
}

TEST_CASE("exit barrier across nodes: the master tells a node its peers finished",
          "[integration][hang][multinode]") {
  Master master;
  auto flags = [&](const std::string& node_rank, const std::string& nproc) {
    return std::vector<std::string>{
        "--rdzv_backend=c10d",      "--rdzv_endpoint=" + master.endpoint(),
        "--rdzv_id=barrier2",       "--nnodes=2",
        "--node_rank=" + node_rank, "--nproc_per_node=" + nproc,
        "--exit_barrier_timeout=1"};
  };
  // Node 0's two workers exit at once; node 1's only worker (rank 2) never does. Node 1 has no
  // local peer that finished: only the master's word can start its barrier.
  Subprocess a(Mxrun(flags("0", "2"), {"--ready"}));
  Subprocess b(Mxrun(flags("1", "1"), {"--ready", "--hang-rank=2"}));
  ProcessResult ra = a.Wait(60s);
  ProcessResult rb = b.Wait(60s);
  INFO(Describe(ra) << Describe(rb));
  CHECK(ra.exit_code == 1);
  CHECK(rb.exit_code == 1);
  CHECK_THAT(rb.err, Catch::Contains("the exit barrier starts for the workers still running here"));
  CHECK(std::regex_search(rb.err, std::regex("hung \\(exit barrier\\): still running 1\\.[0-9] s "
                                             "after the workers of node 0 \\(")));
  CHECK_THAT(ra.err, Catch::Contains("rank       : 2 (local_rank: 0)"));
  CHECK_THAT(rb.err, Catch::Contains("rank       : 2 (local_rank: 0)"));
}

// TORCHELASTIC_UNINTERRUPTIBLE_STATE_TIMEOUT (torchrun 2.13): test_child --vfork-wait puts the
// worker in D state (a vfork parent waits, TASK_KILLABLE, for its child) with no privileges.
namespace {

// The variable, and TMPDIR in `tmp`: the kept hang folders of runs without --log_dir land there.
std::map<std::string, std::string> DStateTimeout(const std::string& seconds, const TempDir& tmp) {
  return {{"TORCHELASTIC_UNINTERRUPTIBLE_STATE_TIMEOUT", seconds}, {"TMPDIR", tmp.path()}};
}

// "worker rank 0 (local_rank 0, pid P)" for the pid the worker printed as "KEY=P".
std::string WorkerNamed(const std::string& out, const std::string& key) {
  const std::vector<int> pids = mxrun::testing::IntsAfter(out, key);
  REQUIRE(pids.size() == 1);
  return "worker rank 0 (local_rank 0, pid " + std::to_string(pids[0]) + ")";
}

}  // namespace

TEST_CASE("uninterruptible sleep: a worker in D state too long is hung and the group restarts",
          "[integration][hang][dstate]") {
  TempDir tmp;
  ProcessResult r = Run(Mxrun({"--nproc_per_node=1", "--max_restarts=1", "--term_timeout=1"},
                              {"--vfork-wait=6", "--vfork-below-attempt=1", "--ready"}),
                        DStateTimeout("1", tmp), 60s);
  INFO(Describe(r));
  CHECK(r.exit_code == 0);
  const std::string who = WorkerNamed(r.out, "vfork-waiting rank=0 pid");
  CHECK_THAT(r.err,
             Catch::Contains("hang detection: a worker in uninterruptible sleep (D state) for 1 s "
                             "is hung (TORCHELASTIC_UNINTERRUPTIBLE_STATE_TIMEOUT)"));
  CHECK_THAT(r.err, Catch::Contains(who + " entered uninterruptible sleep (D-state); will mark it "
                                          "hung if it remains for 1 s"));
  // Measured from the first poll that saw it in D (1.0 s, or a little more on a busy machine).
  CHECK_THAT(r.err, Catch::Contains(who + " is hung (uninterruptible sleep): in D state for 1."));
  CHECK(std::regex_search(r.err, std::regex("in D state for 1\\.[0-9] s, at least "
                                            "TORCHELASTIC_UNINTERRUPTIBLE_STATE_TIMEOUT=1 s; "
                                            "wchan: \\S+; kernel stack: ")));
  CHECK_THAT(r.err, Catch::Contains("restarting the worker group (1 of 1 restarts)"));
  CHECK_THAT(r.out, Catch::Contains("attempt=1"));
  CHECK_THAT(r.out, !Catch::Contains("vfork-done"));  // stopped in D, not left to finish
  CHECK(r.elapsed < 30s);
}

TEST_CASE(
    "uninterruptible sleep: with no restarts left the summary names the worker and mxrun exits 1",
    "[integration][hang][dstate]") {
  TempDir logs;
  ProcessResult r =
      Run(Mxrun({"--nproc_per_node=1", "--term_timeout=1", "--log_dir=" + logs.path()},
                {"--vfork-wait=50", "--ready"}),
          DStateTimeout("1", logs), 60s);
  INFO(Describe(r));
  CHECK(r.exit_code == 1);
  const std::vector<int> pids = mxrun::testing::IntsAfter(r.out, "vfork-waiting rank=0 pid");
  REQUIRE(pids.size() == 1);
  CHECK_THAT(r.err, Catch::Contains("  pid        : " + std::to_string(pids[0]) + "\n"));
  CHECK(std::regex_search(r.err, std::regex("exit       : hung \\(uninterruptible sleep\\): in D "
                                            "state for 1\\.[0-9] s, at least "
                                            "TORCHELASTIC_UNINTERRUPTIBLE_STATE_TIMEOUT=1 s; "
                                            "wchan: \\S+; kernel stack: ")));
  CHECK_THAT(r.err, Catch::Contains("hang state :\n      rank 0 (pid " + std::to_string(pids[0]) +
                                    "): D (uninterruptible sleep"));
  // No tracer was run at it (one cannot attach before it leaves D): no time spent waiting.
  const std::string report = ReadFile(DiagnosticsDir(r.err) + "/rank0.txt");
  CHECK_THAT(report, Catch::Contains("rule         : uninterruptible sleep: in D state for 1."));
  CHECK_THAT(report, Catch::Contains("stack dump: skipped: a tracer cannot attach to a process in "
                                     "uninterruptible sleep"));
  CHECK(r.elapsed < 15s);  // the worker would have stayed in D for 50 s
}

TEST_CASE("uninterruptible sleep: a worker that cannot be reaped after SIGKILL is left behind",
          "[integration][hang][dstate]") {
  // Its zombie is held by a tracer outside its process group, so the agent cannot reap it until
  // the stop's sweep kills that tracer: the stop waits its bounded time, names the pid, goes on.
  TempDir tmp;
  ProcessResult r =
      Run(Mxrun({"--nproc_per_node=1", "--max_restarts=1", "--term_timeout=1"},
                {"--vfork-wait=20", "--vfork-below-attempt=1", "--unreapable", "--ready"}),
          DStateTimeout("1", tmp), 90s);
  INFO(Describe(r));
  CHECK(r.exit_code == 0);
  const std::vector<int> pids = mxrun::testing::IntsAfter(r.out, "vfork-waiting rank=0 pid");
  const std::vector<int> tracers = mxrun::testing::IntsAfter(r.out, "tracer");
  REQUIRE(pids.size() == 1);
  REQUIRE(tracers.size() == 1);
  CHECK_THAT(r.err, Catch::Contains("is hung (uninterruptible sleep)"));
  CHECK_THAT(r.err, Catch::Contains("worker rank 0 (pid " + std::to_string(pids[0]) +
                                    ") exited but cannot be reaped ("));
  CHECK_THAT(r.err, Catch::Contains("tracer holding it): waited 10 s, going on without it"));
  CHECK_THAT(r.err, Catch::Contains("restarting the worker group (1 of 1 restarts)"));
  CHECK_THAT(r.out, Catch::Contains("attempt=1"));
  CHECK(r.elapsed < 40s);
  CHECK(mxrun::testing::WaitForExit(tracers[0], 10s));  // the sweep killed it
}

TEST_CASE("uninterruptible sleep: an unparsable or zero or negative timeout turns the check off",
          "[integration][hang][dstate]") {
  const std::string value = GENERATE(as<std::string>{}, "ten", "0", "-1");
  TempDir tmp;
  ProcessResult r =
      Run(Mxrun({"--nproc_per_node=1"}, {"--vfork-wait=2.5"}), DStateTimeout(value, tmp), 60s);
  INFO(Describe(r));
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("vfork-done rank=0"));  // left in D for 2.5 s, untouched
  CHECK_THAT(r.err, !Catch::Contains("uninterruptible sleep (D"));
  CHECK_THAT(r.err, !Catch::Contains("hung"));
  if (value == "ten") {  // torchrun is silent about it; mxrun says why the check is off
    CHECK_THAT(r.err, Catch::Contains("TORCHELASTIC_UNINTERRUPTIBLE_STATE_TIMEOUT='ten' is not a "
                                      "number of seconds: workers in uninterruptible sleep are not "
                                      "watched (as under torchrun)"));
  }
}
