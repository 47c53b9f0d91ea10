#pragma once
// A real Slurm (Debian's slurm-wlm 22.05 with munge) for integration tests: a private munged, a
// slurmctld and a slurmd per node (two by default, at most 8), `slurmd -N n0`, `slurmd -N n1`,
// ..., on this one host over loopback; optionally with a network topology (topology/tree and the
// topology.conf given), under which srun tells each task its node's switches.
//
// - Everything lives in a private temporary folder: slurm.conf (clients and daemons find it by
//   SLURM_CONF, so /etc/slurm is never read), munge's key, socket and logs, the controller's state,
//   each node's spool, the daemons' logs, output and pid files.
// - Ports come from the kernel (slurmctld's, and one per slurmd: one host, two node daemons, told
//   apart by NodeName's Port=, with NodeAddr=127.0.0.1 for both).
// - The node names resolve to 127.0.0.1 through a private copy of /etc/hosts, bind-mounted over
//   /etc/hosts in a mount namespace of the test process's own (unshare(CLONE_NEWNS) once, with /
//   made recursively private first), so the machine's files are never edited. The test process
//   and everything it starts (daemons, srun, sbatch, mxrun) see that copy.
// - The daemons run in the foreground (-D, -F) as children of the test, each under
//   `setpriv --pdeathsig KILL`, so they die with the test process if it is killed; the destructor
//   first cancels every job still known (bounded wait until squeue is empty), then stops the
//   daemons by pid (SIGTERM, then SIGKILL after a bound).
// - What slurmd starts (each step's slurmstepd and the job's processes) does not die with slurmd:
//   mxrun_slurm_tests therefore runs in a PID namespace of its own (tests/slurm/harness.cc),
//   which the kernel empties when the test process ends, however it ends. There StrayProcesses()
//   can also say whether anything besides the daemons is left.
// - Ready means: `sinfo` lists both nodes idle (bounded wait, through Slurm's own client).
// - KillWait is 5 s (slurm.conf), so scancel tests are short; proctrack/linuxproc and task/none
//   need no cgroups; no accounting daemon (so no sacct: jobs are followed with scontrol).
// - On a failing test the destructor prints every daemon's log and output to stderr.
//
// Needs root (munged, slurmd). Not thread-safe; one cluster at a time per process.

#include <dirent.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <memory>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "rendezvous/net.h"
#include "tests/free_port.h"
#include "tests/subprocess.h"
#include "tests/temp_dir.h"

namespace mxrun::testing {

class SlurmCluster {
 public:
  // Slurm's KillWait (slurm.conf): how long a cancelled step's processes have between SIGTERM
  // and SIGKILL.
  static constexpr int kKillWaitSeconds = 5;
  // Bounds of the fixture's own waits.
  static constexpr std::chrono::seconds kReadyTimeout{30};  // munged's socket, nodes idle
  static constexpr std::chrono::seconds kDrainTimeout{2 * kKillWaitSeconds + 10};  // jobs gone
  static constexpr std::chrono::seconds kStopTimeout{10};    // SIGTERM to SIGKILL, per daemon
  static constexpr std::chrono::seconds kClientTimeout{10};  // one sinfo, squeue, scontrol call

  // Set (to "1") in the environment by tests/slurm/harness.cc when it re-executes the test
  // binary in its own mount and PID namespaces.
  static constexpr char kNamespacesVariable[] = "MXRUN_SLURM_TEST_NAMESPACES";
  // True in the test process once it runs there (set by tests/slurm/harness.cc).
  static inline bool in_own_pid_namespace = false;
  // Whether the running test case has had a failed assertion; kept by the listener in
  // tests/slurm/harness.cc (without it, only the last assertion and exceptions are seen).
  static inline bool test_case_failed = false;

  // A random first job id, far below Slurm's MaxJobId (67043328).
  static long FirstJobId() {
    std::random_device seed;
    return std::uniform_int_distribution<long>(1000, 60000000)(seed);
  }

  // `nodes`: n0 .. n<nodes-1>; `topology_conf`: the text of topology.conf (empty: none).
  explicit SlurmCluster(int nodes = 2, const std::string& topology_conf = "") : nodes_(nodes) {
    REQUIRE(nodes >= 1);
    REQUIRE(nodes <= 8);
    const std::string d = dir_.path();
    // munged wants its socket's folders searchable by all and writable by none but root.
    chmod(d.c_str(), 0711);
    for (const char* sub : {"/state", "/munge", "/jobs"}) mkdir((d + sub).c_str(), 0711);
    for (int i = 0; i < nodes; ++i) mkdir(absl::StrCat(d, "/spool-n", i).c_str(), 0711);
    chmod((d + "/jobs").c_str(), 0755);
    WriteMungeKey(d + "/munge/key");
    PrivateHosts(d + "/hosts");
    char host[256] = {0};
    gethostname(host, sizeof host - 1);
    std::set<int> taken;
    const int ctld_port = DistinctFreePort(taken);
    std::string node_lines, names;
    for (int i = 0; i < nodes; ++i) {
      absl::StrAppend(&node_lines, "NodeName=n", i, " NodeHostname=", host,
                      " NodeAddr=127.0.0.1 Port=", DistinctFreePort(taken), " CPUs=2\n");
      absl::StrAppend(&names, i == 0 ? "" : ",", "n", i);
    }
    if (!topology_conf.empty()) std::ofstream(d + "/topology.conf") << topology_conf;
    conf_ = d + "/slurm.conf";
    // slurmctld runs only where SlurmctldHost names this machine ("This host (...) not a valid
    // controller" otherwise): its own name, reached at 127.0.0.1. Debian builds slurmd with
    // multiple-slurmd support (`slurmd -N NAME`): both nodes are this host, told apart by Port=,
    // and %n in a path is the node's name. config_overrides: the CPUs declared here win over what
    // slurmd finds (`slurmd -C`), so nodes are never drained for a mismatch.
    // One setting per line.
    std::vector<std::string> settings = {
        "ClusterName=mxrun-test",
        // Job ids from a start of the cluster's own: a job's rendezvous run id and port block come
        // from its id (launcher/launch_flags/slurm.h), and clusters that all began at 1 would give
        // every test's first job "slurm-1" and one port block on this one host.
        absl::StrCat("FirstJobId=", FirstJobId()),
        absl::StrCat("SlurmctldHost=", host, "(127.0.0.1)"),
        absl::StrCat("SlurmctldPort=", ctld_port),
        "AuthType=auth/munge",
        "CredType=cred/munge",
        absl::StrCat("AuthInfo=socket=", d, "/munge/socket"),
        "SlurmUser=root",
        "SlurmdUser=root",
        absl::StrCat("StateSaveLocation=", d, "/state"),
        absl::StrCat("SlurmdSpoolDir=", d, "/spool-%n"),
        absl::StrCat("SlurmctldPidFile=", d, "/slurmctld.pid"),
        absl::StrCat("SlurmdPidFile=", d, "/slurmd-%n.pid"),
        absl::StrCat("SlurmctldLogFile=", d, "/slurmctld.log"),
        absl::StrCat("SlurmdLogFile=", d, "/slurmd-%n.log"),
        "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/none",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_Core",
        "SlurmdParameters=config_overrides",
        "MpiDefault=none",
        "ReturnToService=2",
        "MailProg=/bin/true",
        absl::StrCat("KillWait=", kKillWaitSeconds),
        "JobAcctGatherType=jobacct_gather/none",
        "AccountingStorageType=accounting_storage/none",
    };
    // topology.conf is read from slurm.conf's folder.
    if (!topology_conf.empty()) settings.push_back("TopologyPlugin=topology/tree");
    std::ofstream(conf_) << absl::StrJoin(settings, "\n") << "\n"
                         << node_lines << "PartitionName=debug Nodes=" << names
                         << " Default=YES MaxTime=INFINITE State=UP\n";
    setenv("SLURM_CONF", conf_.c_str(), 1);
    Start("munged", {"/usr/sbin/munged", "-F", "--key-file=" + d + "/munge/key",
                     "--socket=" + d + "/munge/socket", "--pid-file=" + d + "/munge/pid",
                     "--log-file=" + d + "/munged.log", "--seed-file=" + d + "/munge/seed"});
    WaitFor([&] { return access((d + "/munge/socket").c_str(), F_OK) == 0; }, "munged's socket");
    Start("slurmctld", {"/usr/sbin/slurmctld", "-D", "-i"});
    for (int i = 0; i < nodes; ++i) {
      Start(absl::StrCat("slurmd-n", i), {"/usr/sbin/slurmd", "-D", "-N", absl::StrCat("n", i)});
    }
    WaitFor(
        [&] {
          ProcessResult r = Run({"sinfo", "-N", "-h", "-o", "%N %t"}, {}, kClientTimeout);
          if (r.exit_code != 0) return false;
          for (int i = 0; i < nodes; ++i) {
            if (r.out.find(absl::StrCat("n", i, " idle")) == std::string::npos) return false;
          }
          return true;
        },
        "every node idle in sinfo");
  }

  ~SlurmCluster() {
    // slurmd leaves running steps alone when it stops: cancel what a failed test left first.
    CancelAllJobs();
    for (auto it = daemons_.rbegin(); it != daemons_.rend(); ++it) {
      ::kill((*it)->pid(), SIGTERM);
      (*it)->Wait(kStopTimeout);  // SIGKILLs it at the bound
    }
    // The daemons' logs, when the test is failing (a REQUIRE unwinding, or the last check failed).
    if (test_case_failed || std::uncaught_exceptions() > 0 ||
        !Catch::getResultCapture().lastAssertionPassed()) {
      DumpLogs();
    }
    unsetenv("SLURM_CONF");
  }

  const std::string& folder() const { return dir_.path(); }
  // A folder every "node" (and the test) can write job files to.
  std::string jobs() const { return dir_.path() + "/jobs"; }
  std::string Logs() const {
    // In the foreground the daemons copy their log to stderr (NAME.out), which also holds what
    // they said before opening the log: NAME.out stands in for an empty or missing log. munged
    // (-F) logs to stderr only.
    std::string all;
    std::vector<std::string> names{"munged", "slurmctld"};
    for (int i = 0; i < nodes_; ++i) names.push_back(absl::StrCat("slurmd-n", i));
    for (const std::string& name : names) {
      std::string file = absl::StrCat(dir_.path(), "/", name, ".log");
      std::string text = ReadFile(file);
      if (text.empty()) text = ReadFile(file = absl::StrCat(dir_.path(), "/", name, ".out"));
      absl::StrAppend(&all, "---- ", file, "\n", text);
    }
    return all;
  }
  void DumpLogs() const { std::fprintf(stderr, "%s\n", Logs().c_str()); }

  // `scontrol show job ID` as KEY=VALUE words.
  std::string JobField(const std::string& job_id, const std::string& key) const {
    ProcessResult r = Run({"scontrol", "show", "job", job_id}, {}, kClientTimeout);
    const std::string needle = key + "=";
    size_t at = r.out.find(" " + needle);
    if (at == std::string::npos) at = r.out.find(needle) == 0 ? 0 : std::string::npos;
    if (at == std::string::npos) return "";
    at = r.out.find('=', at) + 1;
    return r.out.substr(at, r.out.find_first_of(" \n", at) - at);
  }

  // Waits (bounded) until the job's state is one of `states` (e.g. "COMPLETED", "RUNNING").
  std::string WaitForJobState(const std::string& job_id, const std::set<std::string>& states,
                              std::chrono::seconds timeout = std::chrono::seconds(60)) const {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    std::string state;
    while (std::chrono::steady_clock::now() < deadline) {
      state = JobField(job_id, "JobState");
      if (states.count(state) != 0) return state;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return state;
  }

  // Job ids squeue lists (pending, running or completing).
  std::vector<std::string> Jobs() const {
    ProcessResult r = Run({"squeue", "-h", "-o", "%i"}, {}, kClientTimeout);
    std::vector<std::string> ids;
    std::istringstream lines(r.out);
    for (std::string id; std::getline(lines, id);) {
      if (!id.empty()) ids.push_back(id);
    }
    return ids;
  }

  // Waits (bounded) until squeue lists no job; true when it lists none.
  bool WaitForNoJobs(std::chrono::seconds timeout) const {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!Jobs().empty()) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return true;
  }

  // In the test binary's own PID namespace (in_own_pid_namespace): "pid command" of every process
  // there besides the namespace's init, this test process and the cluster's daemons with their
  // own helpers (slurmctld's slurmscriptd), i.e. what jobs left behind: slurmstepd (which slurmd
  // starts detached, its parent is init), the batch script, srun, mxrun, workers. Empty, with a
  // warning, outside such a namespace, where it cannot tell.
  std::vector<std::string> StrayProcesses() const {
    std::vector<std::string> strays;
    if (!in_own_pid_namespace) {
      WARN("not in a PID namespace of the test's own: stray processes are not looked for");
      return strays;
    }
    std::set<pid_t> known{1, getpid()};
    for (const auto& daemon : daemons_) known.insert(daemon->pid());
    const pid_t controller = daemons_.size() > 1 ? daemons_[1]->pid() : -1;
    DIR* proc = opendir("/proc");
    REQUIRE(proc != nullptr);
    for (dirent* entry = readdir(proc); entry != nullptr; entry = readdir(proc)) {
      const pid_t pid = static_cast<pid_t>(std::atoi(entry->d_name));
      if (pid <= 0 || known.count(pid) != 0 || ParentOf(pid) == controller) continue;
      std::string command = ReadFile(absl::StrCat("/proc/", pid, "/cmdline"));
      std::replace(command.begin(), command.end(), '\0', ' ');
      if (command.empty()) continue;  // a zombie, or gone meanwhile
      strays.push_back(absl::StrCat(pid, " ", command));
    }
    closedir(proc);
    return strays;
  }

  // Waits (bounded) until StrayProcesses() is empty; returns what is still there at the bound.
  std::vector<std::string> WaitForNoStrays(std::chrono::seconds timeout) const {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    std::vector<std::string> strays = StrayProcesses();
    while (!strays.empty() && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      strays = StrayProcesses();
    }
    return strays;
  }

 private:
  // The parent's pid from /proc/PID/stat ("pid (comm) state ppid ..."); -1 when gone.
  static pid_t ParentOf(pid_t pid) {
    const std::string stat = ReadFile(absl::StrCat("/proc/", pid, "/stat"));
    const size_t after_comm = stat.rfind(')');
    if (after_comm == std::string::npos) return -1;
    int ppid = -1;
    char state = 0;
    if (std::sscanf(stat.c_str() + after_comm + 1, " %c %d", &state, &ppid) != 2) return -1;
    return static_cast<pid_t>(ppid);
  }

  // Cancels every job squeue still lists and waits (bounded) until it lists none.
  void CancelAllJobs() const {
    const std::vector<std::string> jobs = Jobs();
    if (jobs.empty()) return;
    std::vector<std::string> argv{"scancel"};
    argv.insert(argv.end(), jobs.begin(), jobs.end());
    Run(argv, {}, kClientTimeout);
    if (!WaitForNoJobs(kDrainTimeout)) {
      std::fprintf(stderr, "SlurmCluster: jobs still listed %lld s after scancel\n",
                   static_cast<long long>(kDrainTimeout.count()));
    }
  }

  // Once per process: a mount namespace of our own with a private /etc/hosts naming n0 to n7.
  static void PrivateHosts(const std::string& copy) {
    static bool done = false;
    if (done) return;
    {
      std::ofstream out(copy);
      out << ReadFile("/etc/hosts") << "\n127.0.0.1 n0 n1 n2 n3 n4 n5 n6 n7\n";
    }
    INFO("the Slurm test cluster needs root (a mount namespace, munged, slurmd)");
    REQUIRE(unshare(CLONE_NEWNS) == 0);
    REQUIRE(mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) == 0);
    REQUIRE(mount(copy.c_str(), "/etc/hosts", nullptr, MS_BIND, nullptr) == 0);
    done = true;
  }

  static void WriteMungeKey(const std::string& path) {
    std::ifstream random("/dev/urandom", std::ios::binary);
    std::string key(1024, '\0');
    random.read(key.data(), static_cast<std::streamsize>(key.size()));
    std::ofstream(path, std::ios::binary) << key;
    chmod(path.c_str(), 0400);
  }

  // Starts a daemon in the foreground, its stdout and stderr into NAME.out in the folder (a pipe
  // nobody reads while it runs could fill up and stall it). sh and setpriv exec, so the pid is
  // the daemon's.
  void Start(const std::string& name, std::vector<std::string> argv) {
    argv.insert(argv.begin(),
                {"sh", "-c", "exec \"$@\" >\"$0\" 2>&1", dir_.path() + "/" + name + ".out",
                 "setpriv", "--pdeathsig", "KILL", "--"});
    daemons_.push_back(std::make_unique<Subprocess>(argv));
  }

  template <typename Ready>
  void WaitFor(Ready ready, const char* what) {
    const auto deadline = std::chrono::steady_clock::now() + kReadyTimeout;
    while (!ready()) {
      if (std::chrono::steady_clock::now() > deadline) {
        DumpLogs();
        FAIL("the Slurm test cluster did not come up: no " << what << " in "
                                                           << kReadyTimeout.count() << " s");
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }

  TempDir dir_;
  int nodes_ = 2;
  std::string conf_;
  std::vector<std::unique_ptr<Subprocess>> daemons_;
};

}  // namespace mxrun::testing
