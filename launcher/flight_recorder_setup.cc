#include "launcher/flight_recorder_setup.h"

#include <sys/stat.h>
#include <sys/un.h>

#include "absl/strings/str_cat.h"
#include "agent/process/process_launcher.h"
#include "common/env_contract.h"
#include "spdlog/spdlog.h"

namespace mxrun {

void SetUpFlightRecorder(const LaunchOptions& options, const WorkerCommand& command,
                         const std::string& scratch_dir, int local_world_size, WorkerSpec& worker,
                         FlightRecorderConfig& flight) {
  if (options.entrypoint_kind == EntrypointKind::kBundledTrainer) return;
  EnvMap& env = worker.base_env;
  std::string size;
  for (const char* name : {"TORCH_FR_BUFFER_SIZE", "TORCH_NCCL_TRACE_BUFFER_SIZE"}) {
    if (auto it = env.find(name); it != env.end() && size.empty()) size = it->second;
  }
  if (size == "0") return;  // the user turned it off
  const bool defaulted = size.empty();
  if (defaulted) env["TORCH_FR_BUFFER_SIZE"] = std::to_string(kDefaultFlightRecorderEntries);

  const std::string dir = scratch_dir + "/fr";
  const std::string longest = absl::StrCat(dir, "/fr-", std::max(local_world_size - 1, 0), ".sock");
  if (longest.size() >= sizeof(sockaddr_un{}.sun_path)) {
    spdlog::info(
        "flight recorder: the scratch folder's path is too long for a Unix socket ({} "
        "bytes); on a hang the ranks' recorders are not taken (set TMPDIR shorter)",
        longest.size());
    return;
  }
  if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    spdlog::info("flight recorder: cannot create {}; on a hang the ranks' recorders are not taken",
                 dir);
    return;
  }
  worker.flight_socket_dir = dir;
  flight.on = true;
  flight.env = EnvToStrings(env);
  if (options.entrypoint_kind == EntrypointKind::kExecutable) {
    // A program that runs Python itself: the verdict takes the python3 on PATH.
    auto path = env.find("PATH");
    flight.python = ResolveExecutable("python3", path != env.end() ? path->second
                                                                   : "/usr/local/bin:/usr/bin:/bin")
                        .value_or("");
  } else {
    flight.python = command.executable;
  }
  if (defaulted) {
    spdlog::debug("flight recorder on: TORCH_FR_BUFFER_SIZE={} (set it to 0 to turn it off)",
                  kDefaultFlightRecorderEntries);
  }
}

}  // namespace mxrun
