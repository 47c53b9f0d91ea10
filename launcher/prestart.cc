#include "launcher/prestart.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/env_contract.h"

namespace mxrun {
namespace {

constexpr const char* kBootstrap = "mxrun._prestart";
constexpr auto kImportCheckTimeout = std::chrono::seconds(20);

// Exit status of `python -c "import mxrun._prestart"` in the workers' environment, or -1 when it
// could not run or did not end in time. The module imports only the standard library (no torch),
// so this takes a Python start: tens of milliseconds.
int ImportCheck(const std::string& python, const EnvMap& env) {
  std::vector<std::string> args = {python, "-c", absl::StrCat("import ", kBootstrap)};
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<std::string> env_strings = EnvToStrings(env);
  std::vector<char*> envp;
  for (std::string& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, python.c_str(), &actions, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) return -1;
  const auto deadline = std::chrono::steady_clock::now() + kImportCheckTimeout;
  int status = 0;
  while (true) {
    const pid_t done = waitpid(pid, &status, WNOHANG);
    if (done == pid) break;
    if (done < 0) return -1;
    if (std::chrono::steady_clock::now() >= deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace

absl::Status ConfigurePrestart(const WorkerCommand& command, int local_world_size,
                               WorkerSpec& worker) {
  // python3 -u SCRIPT ARGS  ->  python3 -u -m mxrun._prestart SCRIPT ARGS (and -m MODULE alike)
  if (command.argv.size() < 3 || command.argv[1] != "-u") {
    return absl::InvalidArgumentError("--prestart: the entrypoint is not a Python script");
  }
  if (ImportCheck(command.executable, worker.base_env) != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--prestart: the workers' Python (", command.executable, ") cannot import ", kBootstrap,
        ": install mxrun into it (pip install mxrun), or put the mxrun checkout's python/ folder "
        "on PYTHONPATH"));
  }
  worker.standby_argv = {command.argv[0], "-u", "-m", kBootstrap};
  worker.standby_argv.insert(worker.standby_argv.end(), command.argv.begin() + 2,
                             command.argv.end());
  worker.standby_workers = local_world_size;
  worker.prestart = true;
  return absl::OkStatus();
}

}  // namespace mxrun
