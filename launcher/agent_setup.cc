#include "launcher/agent_setup.h"

#include <limits.h>
#include <unistd.h>

#include <chrono>
#include <optional>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "agent/node/gpu_devices.h"
#include "common/service_notify.h"
#include "common/visible_devices.h"
#include "launcher/slurm_kill_wait.h"
#include "spdlog/spdlog.h"

namespace mxrun {
namespace {

std::string HostName() {
  char name[HOST_NAME_MAX + 1] = {};
  if (gethostname(name, sizeof name - 1) != 0) return "localhost";
  return name;
}

// Under Slurm a cancelled step gets SIGKILL KillWait seconds after SIGTERM: the workers' grace
// must end before (slurm_kill_wait.h).
void FitGraceToKillWait(const EnvMap& env, AgentSettings& settings) {
  absl::StatusOr<std::chrono::milliseconds> kill_wait =
      QuerySlurmKillWait(env, std::chrono::seconds(2));
  if (!kill_wait.ok()) {
    spdlog::info(
        "Slurm's KillWait is unknown ({}): workers get the default {} s after SIGTERM; "
        "--term_timeout sets it",
        std::string(kill_wait.status().message()), settings.term_timeout.count() / 1000.0);
    return;
  }
  const std::chrono::milliseconds grace = GraceWithinKillWait(*kill_wait);
  if (grace >= settings.term_timeout) return;
  settings.term_timeout = grace;
  spdlog::info(
      "Slurm's KillWait is {} s: workers get {} s after SIGTERM before SIGKILL, so that "
      "mxrun ends before Slurm kills it (--term_timeout sets it)",
      kill_wait->count() / 1000.0, grace.count() / 1000.0);
}

absl::StatusOr<WorkerSpec> ComposeWorkerSpec(const LaunchOptions& options, const EnvMap& env,
                                             const WorkerCommand& command, int nproc) {
  WorkerSpec worker;
  worker.executable = command.executable;
  worker.argv = command.argv;
  worker.base_env = env;
  // torchrun puts its --signals_to_handle into its own environment, which workers inherit.
  worker.base_env["TORCHELASTIC_SIGNALS_TO_HANDLE"] = options.signals_to_handle_text;
  worker.role = options.role;
  worker.host_name = HostName();
  worker.json_logs = options.json_logs;
  worker.logs = options.logs;
  worker.line_prefix_template = options.log_line_prefix_template;
  worker.virtual_local_rank = options.virtual_local_rank;
  worker.standby_workers = options.standby_workers;  // warm standbys (standby_flags.cc)
  if (options.virtual_local_rank && !DeviceOfLocalRank(env, nproc - 1)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--virtual_local_rank: CUDA_VISIBLE_DEVICES='", env.at("CUDA_VISIBLE_DEVICES"), "' lists ",
        SplitVisibleDevices(env.at("CUDA_VISIBLE_DEVICES")).size(), " device(s) for ", nproc,
        " workers; accepted: one entry per worker, or CUDA_VISIBLE_DEVICES unset (worker N gets "
        "device N)"));
  }
  return worker;
}

}  // namespace

absl::StatusOr<AgentConfig> ComposeAgentConfig(const LaunchOptions& options, const EnvMap& env,
                                               const WorkerCommand& command, int nproc,
                                               const std::string& run_id) {
  absl::StatusOr<WorkerSpec> worker = ComposeWorkerSpec(options, env, command, nproc);
  if (!worker.ok()) return worker.status();
  AgentConfig config;
  config.worker = std::move(*worker);
  config.settings = options.agent;
  if (options.grace_fits_kill_wait) FitGraceToKillWait(env, config.settings);
  config.entrypoint_name = command.display_name;
  config.notifier = ServiceNotifier::FromEnv(env, static_cast<long>(::getpid()));
  config.events.handler = options.event_log_handler;
  config.events.run_id = run_id;
  config.events.role = options.role;
  config.events.rdzv_backend =
      RunsStandalone(options) ? "c10d" : options.rdzv_backend;  // torchrun's
  config.events.entry_point = command.executable;
  // The GPUs this node's workers drive (CUDA_VISIBLE_DEVICES' entries, or their local ranks):
  // asked through NVML before a respawn, and nothing is waited for where NVML is absent.
  for (int rank = 0; rank < nproc; ++rank) {
    if (std::optional<std::string> entry = DeviceOfLocalRank(env, rank)) {
      config.gpu_entries.push_back(*entry);
    }
  }
  config.settings.health.gpu_entries = config.gpu_entries;
  config.settings.health.gpu_entries_are_local_ranks = !env.contains("CUDA_VISIBLE_DEVICES");
  return config;
}

}  // namespace mxrun
