#include "launcher/hang_setup.h"

#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "agent/hang/file_timer.h"
#include "agent/hang/uninterruptible_watch.h"
#include "launcher/flight_recorder_setup.h"
#include "launcher/node_setup.h"
#include "spdlog/spdlog.h"

namespace mxrun {

absl::Status SetUpHangDetection(const LaunchOptions& options, const WorkerCommand& command,
                                const EnvMap& env, const std::string& scratch_dir, int nproc,
                                const std::string& run_id, AgentConfig& config) {
  WorkerSpec& worker = config.worker;
  config.hang.settings = options.hang;
  worker.heartbeat_files = options.hang.heartbeat_timeout.count() > 0;
  if (options.file_timer) {  // torchrun's watchdog
    absl::StatusOr<std::unique_ptr<FileTimerPipe>> pipe =
        FileTimerPipe::Create(!options.file_timer_path.empty() ? options.file_timer_path
                                                               : scratch_dir + "/watchdog_timer");
    if (!pipe.ok()) return pipe.status();
    config.timer_pipe = std::move(*pipe);
  }
  // torchrun 2.13's watch on workers stuck in uninterruptible sleep (uninterruptible_watch.h).
  if (options.uninterruptible_timeout.count() > 0) {
    config.hang.uninterruptible_timeout = options.uninterruptible_timeout;
    spdlog::info(
        "hang detection: a worker in uninterruptible sleep (D state) for {:g} s is hung "
        "({})",
        static_cast<double>(options.uninterruptible_timeout.count()) / 1000.0,
        kUninterruptibleTimeoutEnv);
  }
  config.hang.fallback_dir = TempBase(env);
  config.hang.run_id = run_id;
  auto path_env = env.find("PATH");
  config.hang.diagnostics.path_env =
      path_env != env.end() ? path_env->second : "/usr/local/bin:/usr/bin:/bin";
  config.hang.diagnostics.stack_dumper = options.stack_dumper;
  SetUpFlightRecorder(options, command, scratch_dir, nproc, worker, config.hang.flight);
  if (worker.heartbeat_files || config.timer_pipe) {
    std::string rules;
    if (worker.heartbeat_files) {
      absl::StrAppend(&rules, "heartbeat (MXRUN_HEARTBEAT_FILE) silent over ",
                      options.hang.heartbeat_timeout.count() / 1000.0, " s");
    }
    if (config.timer_pipe) {
      absl::StrAppend(&rules, rules.empty() ? "" : ", ", "FileTimer on ",
                      config.timer_pipe->path());
    }
    spdlog::info("hang detection: {}; exit barrier {} s", rules,
                 options.hang.exit_barrier_timeout.count() / 1000.0);
  }
  return absl::OkStatus();
}

}  // namespace mxrun
