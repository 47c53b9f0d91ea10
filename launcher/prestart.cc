#include "launcher/prestart.h"

#include <chrono>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "agent/process/helper_run.h"
#include "common/env_contract.h"

namespace mxrun {
namespace {

constexpr const char* kBootstrap = "mxrun._prestart";
constexpr auto kImportCheckTimeout = std::chrono::seconds(20);

// Whether `python -c "import mxrun._prestart"` succeeds in the workers' environment. The module
// imports only the standard library (no torch), so this takes a Python start: tens of
// milliseconds.
bool CanImport(const std::string& python, const EnvMap& env) {
  HelperOptions options;
  options.timeout = kImportCheckTimeout;
  options.env = EnvToStrings(env);
  absl::StatusOr<HelperRun> run =
      RunHelper(python, {python, "-c", absl::StrCat("import ", kBootstrap)}, options);
  return run.ok() && run->ok();
}

}  // namespace

absl::Status ConfigurePrestart(const WorkerCommand& command, int local_world_size,
                               WorkerSpec& worker) {
  // python3 -u SCRIPT ARGS  ->  python3 -u -m mxrun._prestart SCRIPT ARGS (and -m MODULE alike)
  if (command.argv.size() < 3 || command.argv[1] != "-u") {
    return absl::InvalidArgumentError("--prestart: the entrypoint is not a Python script");
  }
  if (!CanImport(command.executable, worker.base_env)) {
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
