// What mxrun_slurm_tests sets up around Catch: namespaces of its own, and a listener that tells
// the fixture whether the running test case has failed (so that it prints the daemons' logs).
//
// The Slurm tests run in a mount and a PID namespace of their own: before Catch's main, this
// binary re-executes itself under
//
//   unshare --mount --propagation private --pid --fork --kill-child --mount-proc -- <this binary>
//
// - The mount namespace is where tests/slurm_cluster.h bind-mounts its private /etc/hosts (n0 and
//   n1 at 127.0.0.1); the machine's /etc/hosts is never touched.
// - The PID namespace is what makes "nothing is left" hold however the test ends. The fixture's
//   daemons die with the test (parent-death signal), but each job step's slurmstepd, and the
//   job's processes under it, are started by slurmd as daemons of their own and outlive a killed
//   slurmd. When the namespace's first process exits, the kernel SIGKILLs every process left in
//   it; `--kill-child` has unshare pass its own death (ctest's timeout, Ctrl-C) on to that
//   process. `--mount-proc` gives the namespace its own /proc, which proctrack/linuxproc and the
//   tests read.
//
// In the namespace, pid 1 is this binary again acting as a minimal init: it forks the test process
// (pid 2, which goes on to Catch's main), reaps every orphan the namespace's daemons leave, passes
// SIGTERM, SIGINT and SIGHUP on to the test process, and exits with the test's status once it
// ends, taking everything else in the namespace with it. Everything here runs before any thread
// exists. Without root (where unshare would fail) the binary runs as it is, and the fixture says
// what it lacks.

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

// The listener's base class is among Catch's external interfaces.
#define CATCH_CONFIG_EXTERNAL_INTERFACES
#include <catch2/catch.hpp>

#include "tests/slurm_cluster.h"

namespace {

pid_t g_test_process = 0;

void PassOn(int signal) {
  if (g_test_process > 0) kill(g_test_process, signal);
}

// This binary's arguments as it was started (argv is not reachable before main).
std::vector<std::string> OwnArguments() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  const std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::string> args;
  for (size_t start = 0; start < all.size();) {
    const size_t end = all.find('\0', start);
    args.push_back(all.substr(start, end - start));
    start = end == std::string::npos ? all.size() : end + 1;
  }
  return args;
}

// Returns only when unshare could not be started.
void ReExecInNamespaces() {
  char self[4096];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  std::vector<std::string> args{"unshare",
                                "--mount",
                                "--propagation",
                                "private",
                                "--pid",
                                "--fork",
                                "--kill-child",
                                "--mount-proc",
                                "--",
                                std::string(self, n > 0 ? static_cast<size_t>(n) : 0)};
  const std::vector<std::string> own = OwnArguments();
  if (own.size() > 1) args.insert(args.end(), own.begin() + 1, own.end());
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  setenv(mxrun::testing::SlurmCluster::kNamespacesVariable, "1", 1);
  execv("/usr/bin/unshare", argv.data());
  // Only reached when unshare is missing: say so, and run without the namespaces.
  std::fprintf(stderr, "mxrun_slurm_tests: cannot run /usr/bin/unshare (%s): no namespaces\n",
               strerror(errno));
  unsetenv(mxrun::testing::SlurmCluster::kNamespacesVariable);
}

// pid 1 of the namespace: reap until the test process ends, then end with its status.
[[noreturn]] void Init(pid_t test_process) {
  g_test_process = test_process;
  struct sigaction pass_on = {};
  pass_on.sa_handler = PassOn;
  for (int signal : {SIGTERM, SIGINT, SIGHUP}) sigaction(signal, &pass_on, nullptr);
  int status = 0;
  for (;;) {
    int s = 0;
    const pid_t reaped = waitpid(-1, &s, 0);
    if (reaped == test_process) {
      status = s;
      break;
    }
    if (reaped < 0 && errno == ECHILD) break;
  }
  _exit(WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
}

bool EnterOwnNamespaces() {
  if (getenv(mxrun::testing::SlurmCluster::kNamespacesVariable) == nullptr) {
    if (geteuid() != 0) return false;
    ReExecInNamespaces();
    return false;
  }
  if (getpid() != 1) return false;  // started with the variable set by someone else
  const pid_t test_process = fork();
  if (test_process < 0) {
    std::fprintf(stderr, "mxrun_slurm_tests: fork: %s\n", strerror(errno));
    _exit(1);
  }
  if (test_process > 0) Init(test_process);
  mxrun::testing::SlurmCluster::in_own_pid_namespace = true;
  return true;
}

[[maybe_unused]] const bool kInOwnNamespaces = EnterOwnNamespaces();

// Keeps SlurmCluster::test_case_failed up to date: reset when a test case starts, set by any
// failed assertion (a CHECK's as well as a REQUIRE's) or an unexpected exception.
class FailureListener : public Catch::TestEventListenerBase {
 public:
  using TestEventListenerBase::TestEventListenerBase;
  void testCaseStarting(const Catch::TestCaseInfo& info) override {
    TestEventListenerBase::testCaseStarting(info);
    mxrun::testing::SlurmCluster::test_case_failed = false;
  }
  bool assertionEnded(const Catch::AssertionStats& stats) override {
    if (!stats.assertionResult.isOk()) mxrun::testing::SlurmCluster::test_case_failed = true;
    return true;
  }
};

}  // namespace

CATCH_REGISTER_LISTENER(FailureListener)
