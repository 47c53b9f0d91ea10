#include "agent/process/death_guardian.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <set>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/files.h"
#include "common/strings.h"

namespace mxrun {
namespace {

[[noreturn]] void GuardianMain(int read_fd, const std::string& scratch_dir) {
  prctl(PR_SET_NAME, "mxrun-guardian");
  // Ctrl-C and service stops are for the agent, which forwards them; the guardian waits for EOF.
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE}) signal(sig, SIG_IGN);
  sigset_t empty;
  sigemptyset(&empty);
  sigprocmask(SIG_SETMASK, &empty, nullptr);
  // Hold none of the agent's pipes or sockets open (a reader waiting for the agent's EOF would
  // otherwise wait for the guardian too).
  int null_fd = open("/dev/null", O_RDWR);
  for (int fd = 0; fd < 3; ++fd) dup2(null_fd, fd);
  if (null_fd > 2) close(null_fd);
  if (read_fd != 3) {
    dup2(read_fd, 3);
    read_fd = 3;
  }
  syscall(SYS_close_range, 4U, ~0U, 0U);

  std::set<pid_t> groups;
  int value = 0;
  while (true) {
    ssize_t n = read(read_fd, &value, sizeof value);
    if (n < 0 && errno == EINTR) continue;
    if (n != sizeof value) break;  // EOF: the agent is gone
    if (value > 0) groups.insert(value);
    if (value < 0) groups.erase(-value);
  }
  for (pid_t pgid : groups) kill(-pgid, SIGKILL);
  RemoveTree(scratch_dir);
  _exit(0);
}

}  // namespace

absl::StatusOr<DeathGuardian> DeathGuardian::Start(const std::string& scratch_dir) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    return absl::InternalError(absl::StrCat("pipe2: ", ErrnoText(errno)));
  }
  pid_t pid = fork();
  if (pid < 0) {
    int err = errno;
    close(fds[0]);
    close(fds[1]);
    return absl::InternalError(absl::StrCat("fork: ", ErrnoText(err)));
  }
  if (pid == 0) {
    close(fds[1]);
    GuardianMain(fds[0], scratch_dir);
  }
  close(fds[0]);
  return DeathGuardian(pid, fds[1]);
}

DeathGuardian::DeathGuardian(DeathGuardian&& other) noexcept
    : pid_(other.pid_), write_fd_(other.write_fd_) {
  other.pid_ = -1;
  other.write_fd_ = -1;
}

DeathGuardian& DeathGuardian::operator=(DeathGuardian&& other) noexcept {
  if (this != &other) {
    if (write_fd_ >= 0) close(write_fd_);
    pid_ = other.pid_;
    write_fd_ = other.write_fd_;
    other.pid_ = -1;
    other.write_fd_ = -1;
  }
  return *this;
}

DeathGuardian::~DeathGuardian() {
  if (write_fd_ >= 0) close(write_fd_);
}

void DeathGuardian::Send(int value) {
  if (write_fd_ < 0) return;
  ssize_t n;
  do {
    n = write(write_fd_, &value, sizeof value);  // 4 bytes: atomic on a pipe
  } while (n < 0 && errno == EINTR);
}

void DeathGuardian::Track(pid_t pgid) { Send(pgid); }
void DeathGuardian::Forget(pid_t pgid) { Send(-pgid); }

}  // namespace mxrun
