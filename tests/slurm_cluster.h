#pragma once
// A real Slurm (Debian's slurm-wlm 22.05 with munge) for integration tests: a private munged, a
// slurmctld and two slurmd, `slurmd -N n0` and `slurmd -N n1`, on this one host over loopback.
//
// - Everything lives in a private temporary folder: slurm.conf (clients and daemons find it by
//   SLURM_CONF, so /etc/slurm is never read), munge's key, socket and logs, the controller's state,
//   each node's spool, the daemons' logs and pid files.
// - Ports come from the kernel (slurmctld's, and one per slurmd: one host, two node daemons).
// - The node names resolve to 127.0.0.1 through a private copy of /etc/hosts, bind-mounted over
//   /etc/hosts in a mount namespace of the test process's own (unshare(CLONE_NEWNS) once, with /
//   made recursively private first), so the machine's files are never edited. The test process
//   and everything it starts (daemons, srun, sbatch, mxrun) see that copy.
// - The daemons run in the foreground (-D, -F) as children of the test, each under
//   `setpriv --pdeathsig KILL`, so they die with the test process if it is killed; the destructor
//   stops them by pid (SIGTERM, then SIGKILL after a bound).
// - Ready means: `sinfo` lists both nodes idle (bounded wait, through Slurm's own client).
// - KillWait is 5 s (slurm.conf), so scancel tests are short; proctrack/linuxproc and task/none
//   need no cgroups; no accounting daemon.

#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <exception>
#include <fstream>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "absl/strings/str_cat.h"
#include "rendezvous/net.h"
#include "tests/subprocess.h"
#include "tests/temp_dir.h"

namespace mxrun::testing {

class SlurmCluster {
 public:
  static constexpr int kKillWaitSeconds = 5;

  SlurmCluster() {
    const std::string d = dir_.path();
    // munged wants its socket's folders searchable by all and writable by none but root.
    chmod(d.c_str(), 0711);
    for (const char* sub : {"/state", "/spool-n0", "/spool-n1", "/munge", "/jobs"}) {
      mkdir((d + sub).c_str(), 0711);
    }
    chmod((d + "/jobs").c_str(), 0755);
    WriteMungeKey(d + "/munge/key");
    PrivateHosts(d + "/hosts");
    char host[256] = {0};
    gethostname(host, sizeof host - 1);
    std::set<int> taken;
    const int ctld_port = FreePort(taken), n0_port = FreePort(taken), n1_port = FreePort(taken);
    conf_ = d + "/slurm.conf";
    std::ofstream(conf_) << absl::StrCat(
        "ClusterName=mxrun-test\n"
        "SlurmctldHost=", host, "(127.0.0.1)\n"
        "SlurmctldPort=", ctld_port, "\n"
        "AuthType=auth/munge\nCredType=cred/munge\n"
        "AuthInfo=socket=", d, "/munge/socket\n"
        "SlurmUser=root\nSlurmdUser=root\n"
        "StateSaveLocation=", d, "/state\n"
        "SlurmdSpoolDir=", d, "/spool-%n\n"
        "SlurmctldPidFile=", d, "/slurmctld.pid\nSlurmdPidFile=", d, "/slurmd-%n.pid\n"
        "SlurmctldLogFile=", d, "/slurmctld.log\nSlurmdLogFile=", d, "/slurmd-%n.log\n"
        "ProctrackType=proctrack/linuxproc\nTaskPlugin=task/none\n"
        "SelectType=select/cons_tres\nSelectTypeParameters=CR_Core\n"
        "SlurmdParameters=config_overrides\nMpiDefault=none\nReturnToService=2\n"
        "KillWait=", kKillWaitSeconds, "\n"
        "JobAcctGatherType=jobacct_gather/none\nAccountingStorageType=accounting_storage/none\n"
        "NodeName=n0 NodeHostname=", host, " NodeAddr=127.0.0.1 Port=", n0_port, " CPUs=2\n"
        "NodeName=n1 NodeHostname=", host, " NodeAddr=127.0.0.1 Port=", n1_port, " CPUs=2\n"
        "PartitionName=debug Nodes=n0,n1 Default=YES MaxTime=INFINITE State=UP\n");
    setenv("SLURM_CONF", conf_.c_str(), 1);
    Start({"/usr/sbin/munged", "-F", "--key-file=" + d + "/munge/key",
           "--socket=" + d + "/munge/socket", "--pid-file=" + d + "/munge/pid",
           "--log-file=" + d + "/munge/log", "--seed-file=" + d + "/munge/seed"});
    WaitFor([&] { return access((d + "/munge/socket").c_str(), F_OK) == 0; }, "munged's socket");
    Start({"/usr/sbin/slurmctld", "-D", "-i"});
    Start({"/usr/sbin/slurmd", "-D", "-N", "n0"});
    Start({"/usr/sbin/slurmd", "-D", "-N", "n1"});
    WaitFor(
        [&] {
          ProcessResult r = Run({"sinfo", "-N", "-h", "-o", "%N %t"}, {}, std::chrono::seconds(10));
          return r.exit_code == 0 && r.out.find("n0 idle") != std::string::npos &&
                 r.out.find("n1 idle") != std::string::npos;
        },
        "both nodes idle in sinfo");
  }

  ~SlurmCluster() {
    for (auto it = daemons_.rbegin(); it != daemons_.rend(); ++it) {
      ::kill((*it)->pid(), SIGTERM);
      (*it)->Wait(std::chrono::seconds(10));  // SIGKILLs it at the bound
    }
    // The daemons' logs, when the test is failing (a REQUIRE unwinding, or the last check failed).
    if (std::uncaught_exceptions() > 0 || !Catch::getResultCapture().lastAssertionPassed()) {
      DumpLogs();
    }
    unsetenv("SLURM_CONF");
  }

  const std::string& folder() const { return dir_.path(); }
  // A folder every "node" (and the test) can write job files to.
  std::string jobs() const { return dir_.path() + "/jobs"; }
  std::string Logs() const {
    std::string all;
    for (const char* log : {"/slurmctld.log", "/slurmd-n0.log", "/slurmd-n1.log"}) {
      absl::StrAppend(&all, "---- ", log, "\n", ReadFile(dir_.path() + log));
    }
    return all;
  }
  void DumpLogs() const { std::fprintf(stderr, "%s\n", Logs().c_str()); }

  // `scontrol show job ID` as KEY=VALUE words.
  std::string JobField(const std::string& job_id, const std::string& key) const {
    ProcessResult r = Run({"scontrol", "show", "job", job_id}, {}, std::chrono::seconds(10));
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

 private:
  // Once per process: a mount namespace of our own with a private /etc/hosts naming n0 and n1.
  static void PrivateHosts(const std::string& copy) {
    static bool done = false;
    if (done) return;
    {
      std::ofstream out(copy);
      out << ReadFile("/etc/hosts") << "\n127.0.0.1 n0 n1\n";
    }
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

  static int FreePort(std::set<int>& taken) {
    for (int attempt = 0; attempt < 100; ++attempt) {
      absl::StatusOr<int> port = PickFreePort("127.0.0.1");
      REQUIRE(port.ok());
      if (taken.insert(*port).second) return *port;
    }
    FAIL("no free port");
    return 0;
  }

  void Start(std::vector<std::string> argv) {
    argv.insert(argv.begin(), {"setpriv", "--pdeathsig", "KILL", "--"});
    daemons_.push_back(std::make_unique<Subprocess>(argv));
  }

  template <typename Ready>
  void WaitFor(Ready ready, const char* what) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (!ready()) {
      if (std::chrono::steady_clock::now() > deadline) {
        DumpLogs();
        FAIL(std::string("the Slurm test cluster did not come up: no ") + what + " in 30 s");
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }

  TempDir dir_;
  std::string conf_;
  std::vector<std::unique_ptr<Subprocess>> daemons_;
};

}  // namespace mxrun::testing
