#include "launcher/entrypoint.h"

#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "agent/process/process_launcher.h"
#include "launcher/script_head.h"

namespace mxrun {
namespace {

std::string EnvOr(const EnvMap& env, const std::string& key, const std::string& fallback) {
  auto it = env.find(key);
  return it == env.end() || it->second.empty() ? fallback : it->second;
}

}  // namespace

std::string SelfDir() {
  char path[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", path, sizeof path - 1);
  if (n <= 0) return ".";
  const std::string self(path, static_cast<size_t>(n));
  return self.substr(0, self.rfind('/'));
}

absl::StatusOr<WorkerCommand> BuildWorkerCommand(const LaunchOptions& options, const EnvMap& env,
                                                 const std::string& self_dir) {
  const std::string path_env = EnvOr(env, "PATH", "/usr/local/bin:/usr/bin:/bin");
  WorkerCommand command;
  command.display_name = options.entrypoint;

  auto resolve = [&](const std::string& program,
                     const std::string& what) -> absl::StatusOr<std::string> {
    absl::StatusOr<std::string> resolved = ResolveExecutable(program, path_env);
    if (!resolved.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("cannot run ", what, ": ", resolved.status().message()));
    }
    return resolved;
  };

  switch (options.entrypoint_kind) {
    case EntrypointKind::kExecutable: {
      absl::StatusOr<std::string> program = resolve(options.entrypoint, "the entrypoint");
      if (!program.ok()) return program.status();
      command.executable = *program;
      command.argv.push_back(options.entrypoint);
      break;
    }
    case EntrypointKind::kBundledTrainer: {
      const std::string trainer = self_dir + "/train";
      absl::StatusOr<std::string> program = ResolveExecutable(trainer, path_env);
      if (!program.ok()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "the bundled trainer is not installed beside mxrun (", trainer,
            "): it is built from a checkout against PyTorch's LibTorch (scripts/build.sh); the "
            "wheel holds no trainer. A PyTorch script runs as `mxrun ... script.py`"));
      }
      command.executable = *program;
      command.argv.push_back(trainer);
      break;
    }
    case EntrypointKind::kPythonScript:
    case EntrypointKind::kPythonModule: {
      const std::string python_name = EnvOr(env, "PYTHON_EXEC", "python3");
      absl::StatusOr<std::string> python =
          resolve(python_name, "the Python interpreter (set PYTHON_EXEC to choose another)");
      if (!python.ok()) return python.status();
      command.executable = *python;
      command.argv = {python_name, "-u"};
      if (options.entrypoint_kind == EntrypointKind::kPythonModule) {
        command.argv.push_back("-m");
      } else {
        struct stat st {};
        if (stat(options.entrypoint.c_str(), &st) != 0) {
          return absl::InvalidArgumentError(absl::StrCat(
              "the entrypoint script '", options.entrypoint,
              "' does not exist; give a Python file, -m module, --no_python program, or 'train'"));
        }
        // A .py file is Python's whatever it holds, as before.
        if (!absl::EndsWith(options.entrypoint, ".py")) {
          if (std::optional<std::string> what = NotPythonFileReason(options.entrypoint)) {
            return absl::InvalidArgumentError(absl::StrCat(
                "the entrypoint '", options.entrypoint, "' is ", *what,
                ", not a Python script: run it with --no_python (mxrun --no_python ... ",
                options.entrypoint, ")"));
          }
        }
      }
      command.argv.push_back(options.entrypoint);
      break;
    }
  }
  for (const std::string& arg : options.entrypoint_args) command.argv.push_back(arg);
  return command;
}

}  // namespace mxrun
