#include "agent/process/helper_run.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <thread>

#include "absl/strings/str_cat.h"
#include "agent/process/process_launcher.h"

extern char** environ;

namespace mxrun {
namespace {

// After its output closed, how long it may take to exit (a child of its may hold the pipe past
// it): then its group is killed.
constexpr std::chrono::milliseconds kExitAfterOutput{5'000};

void Record(HelperRun& run, int status) {
  if (WIFEXITED(status)) {
    run.exited = true;
    run.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    run.term_signal = WTERMSIG(status);
  }
}

}  // namespace

std::string HelperRun::Describe(std::chrono::milliseconds timeout) const {
  if (timed_out) return absl::StrCat("did not finish in ", timeout.count() / 1000.0, " s");
  if (exited) return absl::StrCat("exited ", exit_code);
  return absl::StrCat("was killed by signal ", term_signal);
}

absl::StatusOr<HelperRun> RunHelper(const std::string& executable,
                                    const std::vector<std::string>& argv,
                                    const HelperOptions& options) {
  int out[2];
  if (pipe2(out, O_CLOEXEC) != 0) {
    return absl::InternalError(absl::StrCat("cannot make a pipe: ", std::strerror(errno)));
  }
  const int null_fd = options.capture_stderr ? -1 : open("/dev/null", O_WRONLY | O_CLOEXEC);
  SpawnRequest request;
  request.executable = executable;
  request.argv = argv;
  request.env = options.env;
  if (request.env.empty()) {
    for (char** e = environ; e != nullptr && *e != nullptr; ++e) request.env.emplace_back(*e);
  }
  request.stdout_fd = out[1];
  request.stderr_fd = options.capture_stderr ? out[1] : null_fd;
  absl::StatusOr<pid_t> pid = SpawnProcess(request);
  close(out[1]);
  if (null_fd >= 0) close(null_fd);
  if (!pid.ok()) {
    close(out[0]);
    return pid.status();
  }
  HelperRun run;
  const auto deadline = std::chrono::steady_clock::now() + options.timeout;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      run.timed_out = true;
      break;
    }
    pollfd p{out[0], POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(std::min<long long>(left.count(), 1000))) < 0 &&
        errno != EINTR) {
      break;
    }
    if (p.revents == 0) continue;
    char buffer[4096];
    const ssize_t n = read(out[0], buffer, sizeof buffer);
    if (n <= 0) break;  // closed: it ended (or handed its output to nobody)
    run.output.append(buffer, static_cast<size_t>(n));
    if (run.output.size() > options.max_output) {
      run.output.erase(0, run.output.size() - options.max_output);
    }
  }
  close(out[0]);
  int status = 0;
  if (run.timed_out) {
    kill(-*pid, SIGKILL);
    waitpid(*pid, &status, 0);
    return run;
  }
  const auto exit_deadline = std::chrono::steady_clock::now() + kExitAfterOutput;
  pid_t reaped = 0;
  while ((reaped = waitpid(*pid, &status, WNOHANG)) == 0 &&
         std::chrono::steady_clock::now() < exit_deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  if (reaped == 0) {
    kill(-*pid, SIGKILL);
    waitpid(*pid, &status, 0);
  }
  Record(run, status);
  return run;
}

absl::StatusOr<StartedHelper> StartHelper(const std::string& executable,
                                          std::vector<std::string> argv,
                                          std::vector<std::string> env, int output_fd) {
  SpawnRequest request;
  request.executable = executable;
  request.argv = std::move(argv);
  request.env = std::move(env);
  request.stdout_fd = output_fd;
  request.stderr_fd = output_fd;
  absl::StatusOr<pid_t> pid = SpawnProcess(request);
  if (!pid.ok()) return pid.status();
  StartedHelper helper;
  helper.pid = *pid;
  helper.pidfd = static_cast<int>(syscall(SYS_pidfd_open, helper.pid, 0));
  return helper;
}

void WaitForHelpers(const std::vector<StartedHelper*>& helpers,
                    std::chrono::steady_clock::time_point started,
                    std::chrono::steady_clock::time_point deadline, int also_watch,
                    const std::function<void()>& on_readable) {
  using Clock = std::chrono::steady_clock;
  auto forget = [](StartedHelper& helper) {
    helper.pid = -1;
    if (helper.pidfd >= 0) close(helper.pidfd);
    helper.pidfd = -1;
  };
  auto reap_finished = [&] {
    for (StartedHelper* helper : helpers) {
      int status = 0;
      if (helper->pid > 0 && waitpid(helper->pid, &status, WNOHANG) == helper->pid) {
        helper->took = Clock::now() - started;
        forget(*helper);
      }
    }
  };
  while (true) {
    reap_finished();
    std::vector<pollfd> waits;
    bool blind = false;  // a running helper without a pidfd
    for (StartedHelper* helper : helpers) {
      if (helper->pid <= 0) continue;
      if (helper->pidfd >= 0) {
        waits.push_back({helper->pidfd, POLLIN, 0});
      } else {
        blind = true;
      }
    }
    if (waits.empty() && !blind) break;
    if (also_watch >= 0) waits.push_back({also_watch, POLLIN, 0});
    auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) break;
    if (blind) left = std::min<long>(left, 20);
    if (poll(waits.data(), waits.size(), static_cast<int>(left)) < 0 && errno != EINTR) break;
    if (also_watch >= 0 && (waits.back().revents & POLLIN) != 0) on_readable();
  }
  for (StartedHelper* helper : helpers) {
    if (helper->pid <= 0) continue;
    helper->timed_out = true;
    helper->took = Clock::now() - started;
    kill(-helper->pid, SIGKILL);
    // Bounded: a helper stuck in uninterruptible sleep is left for the caller to reap later.
    for (int i = 0; i < 50; ++i) {
      int status = 0;
      if (waitpid(helper->pid, &status, WNOHANG) != 0) break;
      usleep(10'000);
    }
    forget(*helper);
  }
}

}  // namespace mxrun
