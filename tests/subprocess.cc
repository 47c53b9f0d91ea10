#include "tests/subprocess.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>
#include <stdexcept>
#include <thread>

extern char** environ;

namespace mxrun::testing {

Subprocess::Subprocess(const std::vector<std::string>& argv,
                       const std::map<std::string, std::string>& env) {
  std::map<std::string, std::string> merged;
  for (char** e = environ; *e != nullptr; ++e) {
    const char* eq = std::strchr(*e, '=');
    if (eq != nullptr) merged[std::string(*e, static_cast<size_t>(eq - *e))] = eq + 1;
  }
  for (const auto& [k, v] : env) {
    if (v.empty()) {
      merged.erase(k);
    } else {
      merged[k] = v;
    }
  }
  std::vector<std::string> env_strings;
  for (const auto& [k, v] : merged) env_strings.push_back(k + "=" + v);
  std::vector<char*> envp, args;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> argv_copy = argv;
  for (auto& s : argv_copy) args.push_back(s.data());
  args.push_back(nullptr);

  int out[2], err[2];
  if (pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0) throw std::runtime_error("pipe2");
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out[1], 1);
  posix_spawn_file_actions_adddup2(&actions, err[1], 2);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none;
  sigemptyset(&none);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK);
  started_ = std::chrono::steady_clock::now();
  int rc = posix_spawnp(&pid_, args[0], &actions, &attr, args.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  close(out[1]);
  close(err[1]);
  out_fd_ = out[0];
  err_fd_ = err[0];
  if (rc != 0) throw std::runtime_error(std::string("posix_spawnp: ") + std::strerror(rc));
}

Subprocess::~Subprocess() {
  if (!reaped_ && pid_ > 0) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  if (out_fd_ >= 0) close(out_fd_);
  if (err_fd_ >= 0) close(err_fd_);
}

bool Subprocess::Pump(std::chrono::steady_clock::time_point deadline) {
  pollfd fds[2];
  int n = 0;
  if (out_fd_ >= 0) fds[n++] = {out_fd_, POLLIN, 0};
  if (err_fd_ >= 0) fds[n++] = {err_fd_, POLLIN, 0};
  if (n == 0) return false;
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      deadline - std::chrono::steady_clock::now());
  if (left.count() <= 0) return false;
  int ready = poll(fds, n, static_cast<int>(left.count()));
  if (ready <= 0) return ready < 0 && errno == EINTR;
  for (int i = 0; i < n; ++i) {
    if (fds[i].revents == 0) continue;
    char buffer[65536];
    ssize_t got = read(fds[i].fd, buffer, sizeof buffer);
    std::string& sink = fds[i].fd == out_fd_ ? out_ : err_;
    if (got > 0) {
      sink.append(buffer, static_cast<size_t>(got));
    } else {
      close(fds[i].fd);
      (fds[i].fd == out_fd_ ? out_fd_ : err_fd_) = -1;
    }
  }
  return true;
}

bool Subprocess::WaitFor(const std::string& stream, const std::string& needle, int count,
                         std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (CountOccurrences(stream, needle) < count) {
    if (!Pump(deadline)) return CountOccurrences(stream, needle) >= count;
  }
  return true;
}

bool Subprocess::WaitForStdout(const std::string& needle, int count,
                               std::chrono::milliseconds timeout) {
  return WaitFor(out_, needle, count, timeout);
}

bool Subprocess::WaitForStderr(const std::string& needle, int count,
                               std::chrono::milliseconds timeout) {
  return WaitFor(err_, needle, count, timeout);
}

ProcessResult Subprocess::Wait(std::chrono::milliseconds timeout) {
  ProcessResult result;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while ((out_fd_ >= 0 || err_fd_ >= 0) && Pump(deadline)) {
  }
  // Output is closed (or the deadline passed); the exit itself is bounded by the same deadline.
  if (!WaitForExit(pid_, std::chrono::duration_cast<std::chrono::milliseconds>(
                             deadline - std::chrono::steady_clock::now()))) {
    result.timed_out = true;
    kill(pid_, SIGKILL);
  }
  int status = 0;
  waitpid(pid_, &status, 0);
  reaped_ = true;
  result.elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::steady_clock::now() - started_);
  if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) result.term_signal = WTERMSIG(status);
  // Drain what is left without blocking.
  for (int* fd : {&out_fd_, &err_fd_}) {
    if (*fd < 0) continue;
    fcntl(*fd, F_SETFL, O_NONBLOCK);
    char buffer[65536];
    ssize_t got;
    while ((got = read(*fd, buffer, sizeof buffer)) > 0) {
      (fd == &out_fd_ ? out_ : err_).append(buffer, static_cast<size_t>(got));
    }
  }
  result.out = out_;
  result.err = err_;
  return result;
}

ProcessResult Run(const std::vector<std::string>& argv,
                  const std::map<std::string, std::string>& env,
                  std::chrono::milliseconds timeout) {
  Subprocess process(argv, env);
  return process.Wait(timeout);
}

bool WaitForExit(pid_t pid, std::chrono::milliseconds timeout) {
  int fd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
  if (fd < 0) return errno == ESRCH;
  pollfd p{fd, POLLIN, 0};
  int ready = poll(&p, 1, static_cast<int>(std::max<long>(0, timeout.count())));
  close(fd);
  return ready == 1;
}

bool IsAlive(pid_t pid) { return !WaitForExit(pid, std::chrono::milliseconds(0)); }

bool BecomesStopped(pid_t pid) {
  for (int i = 0; i < 500; ++i) {
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
    const size_t paren = text.rfind(')');
    if (paren != std::string::npos && text.compare(paren + 1, 3, " T ") == 0) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

std::string Describe(const ProcessResult& r) {
  return "exit " + std::to_string(r.exit_code) + (r.timed_out ? " (timed out)" : "") +
         "\nstdout:\n" + r.out + "\nstderr:\n" + r.err;
}

#if defined(MXRUN_BIN) && defined(TEST_CHILD_BIN)
std::vector<std::string> MxrunWithChild(const std::vector<std::string>& flags,
                                        const std::vector<std::string>& child_args) {
  std::vector<std::string> argv{MXRUN_BIN};
  argv.insert(argv.end(), flags.begin(), flags.end());
  argv.push_back("--no_python");
  argv.push_back(TEST_CHILD_BIN);
  argv.insert(argv.end(), child_args.begin(), child_args.end());
  return argv;
}
#endif

std::map<std::string, std::string> ReadEnvFile(const std::string& path) {
  std::map<std::string, std::string> env;
  std::istringstream in(ReadFile(path));
  for (std::string line; std::getline(in, line);) {
    auto eq = line.find('=');
    if (eq != std::string::npos) env[line.substr(0, eq)] = line.substr(eq + 1);
  }
  return env;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

std::vector<int> IntsAfter(const std::string& text, const std::string& key) {
  std::vector<int> values;
  const std::string needle = key + "=";
  for (size_t pos = text.find(needle); pos != std::string::npos;
       pos = text.find(needle, pos + needle.size())) {
    values.push_back(std::atoi(text.c_str() + pos + needle.size()));
  }
  return values;
}

int CountOccurrences(const std::string& text, const std::string& needle) {
  int count = 0;
  for (size_t pos = text.find(needle); pos != std::string::npos;
       pos = text.find(needle, pos + needle.size())) {
    ++count;
  }
  return count;
}

}  // namespace mxrun::testing
