#include "launcher/slurm_kill_wait.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "agent/process_launcher.h"

namespace mxrun {

std::optional<std::chrono::milliseconds> ParseKillWait(absl::string_view scontrol_config) {
  for (absl::string_view line : absl::StrSplit(scontrol_config, '\n')) {
    line = absl::StripLeadingAsciiWhitespace(line);
    if (!absl::ConsumePrefix(&line, "KillWait")) continue;
    line = absl::StripLeadingAsciiWhitespace(line);
    if (!absl::ConsumePrefix(&line, "=")) continue;
    std::vector<absl::string_view> words =
        absl::StrSplit(line, ' ', absl::SkipWhitespace());
    int seconds = 0;
    if (words.empty() || !absl::SimpleAtoi(words[0], &seconds) || seconds < 0) return std::nullopt;
    if (words.size() > 1 && words[1] != "sec") return std::nullopt;
    return std::chrono::milliseconds(seconds * 1000L);
  }
  return std::nullopt;
}

std::chrono::milliseconds GraceWithinKillWait(std::chrono::milliseconds kill_wait) {
  return kill_wait - std::min<std::chrono::milliseconds>(std::chrono::seconds(3), kill_wait / 3);
}

absl::StatusOr<std::chrono::milliseconds> QuerySlurmKillWait(const EnvMap& env,
                                                             std::chrono::milliseconds timeout) {
  auto path = env.find("PATH");
  absl::StatusOr<std::string> scontrol =
      ResolveExecutable("scontrol", path != env.end() ? path->second : "/usr/bin:/bin");
  if (!scontrol.ok()) return absl::NotFoundError("scontrol is not on PATH");
  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC) != 0) return absl::InternalError("pipe failed");
  SpawnRequest request;
  request.executable = *scontrol;
  request.argv = {"scontrol", "show", "config"};
  for (const auto& [key, value] : env) request.env.push_back(absl::StrCat(key, "=", value));
  request.stdout_fd = pipe_fds[1];
  const int null_fd = open("/dev/null", O_WRONLY | O_CLOEXEC);  // its complaints are not ours
  request.stderr_fd = null_fd;
  absl::StatusOr<pid_t> pid = SpawnProcess(request);
  close(pipe_fds[1]);
  if (null_fd >= 0) close(null_fd);
  if (!pid.ok()) {
    close(pipe_fds[0]);
    return pid.status();
  }
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::string output;
  bool timed_out = false;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      timed_out = true;
      break;
    }
    pollfd p{pipe_fds[0], POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
    char buffer[4096];
    const ssize_t n = read(pipe_fds[0], buffer, sizeof buffer);
    if (n <= 0) break;
    if (output.size() < (1 << 20)) output.append(buffer, static_cast<size_t>(n));
  }
  close(pipe_fds[0]);
  if (timed_out) kill(-*pid, SIGKILL);
  int status = 0;
  waitpid(*pid, &status, 0);
  if (timed_out) {
    return absl::DeadlineExceededError(absl::StrCat(
        "`scontrol show config` did not answer within ", timeout.count() / 1000.0, " s"));
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return absl::UnavailableError("`scontrol show config` failed");
  }
  std::optional<std::chrono::milliseconds> kill_wait = ParseKillWait(output);
  if (!kill_wait) return absl::UnavailableError("`scontrol show config` printed no KillWait");
  return *kill_wait;
}

}  // namespace mxrun
