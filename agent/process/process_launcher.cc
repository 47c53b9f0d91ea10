#include "agent/process/process_launcher.h"

#include <fcntl.h>
#include <linux/mempolicy.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/control_protocol.h"
#include "common/strings.h"

namespace mxrun {
namespace {

std::vector<char*> CStrings(const std::vector<std::string>& strings) {
  std::vector<char*> out;
  out.reserve(strings.size() + 1);
  for (const auto& s : strings) out.push_back(const_cast<char*>(s.c_str()));
  out.push_back(nullptr);
  return out;
}

// Async-signal-safe write of the errno to the report pipe, then exit.
[[noreturn]] void ChildFail(int report_fd) {
  int err = errno;
  ssize_t ignored = write(report_fd, &err, sizeof err);
  (void)ignored;
  _exit(127);
}

void CloseFrom(int low, int high) {
  if (low > high) return;
  // close_range(2): Linux 5.9+. Fall back to a bounded loop when it is missing.
  if (syscall(SYS_close_range, static_cast<unsigned>(low), static_cast<unsigned>(high), 0) == 0) {
    return;
  }
  long max_fd = sysconf(_SC_OPEN_MAX);
  if (max_fd < 0 || max_fd > 65536) max_fd = 65536;
  if (high > max_fd) high = static_cast<int>(max_fd);
  for (int fd = low; fd <= high; ++fd) close(fd);
}

// The binding of --numa-binding in the form the system calls take, built before fork.
struct Placement {
  cpu_set_t* cpus = nullptr;  // CPU_ALLOC'd; nullptr: none
  size_t cpus_size = 0;
  std::vector<unsigned long> node_mask;  // set_mempolicy's nodemask; empty: none
  ~Placement() {
    if (cpus != nullptr) CPU_FREE(cpus);
  }
};

void BuildPlacement(const SpawnRequest& request, Placement& placement) {
  if (!request.cpus.empty()) {
    const int max_cpu = *std::max_element(request.cpus.begin(), request.cpus.end());
    placement.cpus = CPU_ALLOC(max_cpu + 1);
    placement.cpus_size = CPU_ALLOC_SIZE(max_cpu + 1);
    CPU_ZERO_S(placement.cpus_size, placement.cpus);
    for (int cpu : request.cpus) {
      if (cpu >= 0) CPU_SET_S(cpu, placement.cpus_size, placement.cpus);
    }
  }
  if (request.memory_node >= 0) {
    constexpr int kBits = 8 * sizeof(unsigned long);
    placement.node_mask.assign(request.memory_node / kBits + 1, 0);
    placement.node_mask[request.memory_node / kBits] |= 1UL << (request.memory_node % kBits);
  }
}

// Runs in the child: plain system calls. Errors are ignored: an unbound worker still runs.
void ApplyPlacement(const Placement& placement) {
  if (placement.cpus != nullptr) sched_setaffinity(0, placement.cpus_size, placement.cpus);
  if (!placement.node_mask.empty()) {
    // set_mempolicy(2) reads maxnode bits; the kernel wants one more than the highest node.
    syscall(SYS_set_mempolicy, MPOL_PREFERRED, placement.node_mask.data(),
            placement.node_mask.size() * 8 * sizeof(unsigned long) + 1);
  }
}

// Runs in the child between fork and execve: async-signal-safe calls only.
[[noreturn]] void ExecChild(const SpawnRequest& request, const Placement& placement,
                            char* const* argv, char* const* envp, int report_fd, pid_t parent,
                            int null_fd) {
  sigset_t empty;
  sigemptyset(&empty);
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  for (int sig = 1; sig < NSIG; ++sig) sigaction(sig, &dfl, nullptr);  // EINVAL for KILL/STOP: fine
  if (sigprocmask(SIG_SETMASK, &empty, nullptr) != 0) ChildFail(report_fd);
  // A session of its own, as torchrun's workers (Popen start_new_session): with
  // sched_autogroup_enabled each session is one scheduling share, so workers sharing the agent's
  // session shared one share on a loaded machine. It also leads its own process group (pgid ==
  // pid), which every stop signals.
  if (setsid() < 0) ChildFail(report_fd);
  if (prctl(PR_SET_PDEATHSIG, request.parent_death_signal) != 0) ChildFail(report_fd);
  if (getppid() != parent) _exit(127);  // the agent died before prctl took effect
  // Under Yama's ptrace_scope=1 only ancestors may trace: let the agent and its children (the
  // stack dumpers of hang diagnostics) trace this worker. EINVAL without Yama: nothing to do.
  prctl(PR_SET_PTRACER, parent, 0, 0, 0);
  ApplyPlacement(placement);

  const int in = request.stdin_fd >= 0 ? request.stdin_fd : null_fd;
  if (dup2(in, STDIN_FILENO) < 0) ChildFail(report_fd);
  if (request.stdout_fd >= 0 && dup2(request.stdout_fd, STDOUT_FILENO) < 0) ChildFail(report_fd);
  if (request.stderr_fd >= 0 && dup2(request.stderr_fd, STDERR_FILENO) < 0) ChildFail(report_fd);
  // The control channel becomes fd 3 (kControlFd), inherited across execve.
  int keep = 2;
  if (request.control_fd >= 0) {
    if (report_fd == kControlFd) {
      report_fd = fcntl(report_fd, F_DUPFD_CLOEXEC, kControlFd + 1);
      if (report_fd < 0) _exit(127);
    }
    if (request.control_fd == kControlFd) {
      if (fcntl(kControlFd, F_SETFD, 0) != 0) ChildFail(report_fd);
    } else if (dup2(request.control_fd, kControlFd) < 0) {
      ChildFail(report_fd);
    }
    keep = kControlFd;
  }
  // Keep 0-2 (and 3), and the report pipe; close everything else the agent holds.
  CloseFrom(keep + 1, report_fd - 1);
  CloseFrom(report_fd + 1, ~0U >> 1);

  execve(request.executable.c_str(), argv, envp);
  ChildFail(report_fd);
}

}  // namespace

absl::StatusOr<pid_t> SpawnProcess(const SpawnRequest& request) {
  // Everything the child needs is built before fork.
  std::vector<char*> argv = CStrings(request.argv);
  std::vector<char*> envp = CStrings(request.env);
  Placement placement;
  BuildPlacement(request, placement);
  int null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (null_fd < 0) return absl::InternalError(absl::StrCat("open /dev/null: ", ErrnoText(errno)));
  int report[2];
  if (pipe2(report, O_CLOEXEC) != 0) {
    close(null_fd);
    return absl::InternalError(absl::StrCat("pipe2: ", ErrnoText(errno)));
  }
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) {
    int err = errno;
    close(report[0]);
    close(report[1]);
    close(null_fd);
    return absl::InternalError(absl::StrCat("fork: ", ErrnoText(err)));
  }
  if (pid == 0) {
    close(report[0]);
    ExecChild(request, placement, argv.data(), envp.data(), report[1], parent, null_fd);
  }
  close(report[1]);
  close(null_fd);
  // No setpgid(pid, pid) from here: it would make the child a group leader, and setsid fails for
  // one. Nor is it needed: the read below returns only after execve (or the failure), by which
  // time the child leads its own group, so a signal to -pid right after this call reaches it.

  int child_errno = 0;
  ssize_t n;
  do {
    n = read(report[0], &child_errno, sizeof child_errno);
  } while (n < 0 && errno == EINTR);
  close(report[0]);
  if (n == sizeof child_errno) {
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    return absl::FailedPreconditionError(
        absl::StrCat("cannot execute '", request.executable, "': ", ErrnoText(child_errno)));
  }
  return pid;
}

absl::StatusOr<std::string> ResolveExecutable(const std::string& name,
                                              const std::string& path_env) {
  auto check = [](const std::string& candidate) -> absl::Status {
    struct stat st {};
    if (stat(candidate.c_str(), &st) != 0) {
      return absl::NotFoundError(absl::StrCat("'", candidate, "' does not exist"));
    }
    if (S_ISDIR(st.st_mode)) {
      return absl::PermissionDeniedError(absl::StrCat("'", candidate, "' is a directory"));
    }
    if (access(candidate.c_str(), X_OK) != 0) {
      return absl::PermissionDeniedError(absl::StrCat("'", candidate, "' is not executable"));
    }
    return absl::OkStatus();
  };
  if (name.empty()) return absl::InvalidArgumentError("empty program name");
  if (name.find('/') != std::string::npos) {
    absl::Status status = check(name);
    if (!status.ok()) return status;
    return name;
  }
  absl::Status first_error =
      absl::NotFoundError(absl::StrCat("'", name, "' was not found in PATH"));
  for (absl::string_view dir : absl::StrSplit(path_env, ':')) {
    std::string candidate = absl::StrCat(dir.empty() ? "." : dir, "/", name);
    absl::Status status = check(candidate);
    if (status.ok()) return candidate;
    if (absl::IsPermissionDenied(status) && absl::IsNotFound(first_error)) first_error = status;
  }
  return first_error;
}

}  // namespace mxrun
