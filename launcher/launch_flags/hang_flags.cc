// Hang detection's time-outs (agent/hang_watch.h): a silent heartbeat, and workers that run on
// after another one finished. The bundled trainer beats, so it is watched by default.

#include "launcher/launch_flags/groups.h"

namespace mxrun {

LaunchFlagGroup HangFlags() {
  LaunchFlagGroup group;
  group.flags = {
      {"hang_timeout", "", false,
       "seconds a worker that touched MXRUN_HEARTBEAT_FILE may stay silent before it counts as "
       "hung (0: off; default off, 300 for the bundled trainer)", ""},
      {"exit_barrier_timeout", "", false,
       "seconds workers may run on after another worker of the job exited 0 before they count "
       "as hung (0: off)", "300"},
  };
  group.apply = [](const FlagValues& v, LaunchOptions& o) -> absl::Status {
    double heartbeat =
        o.entrypoint_kind == EntrypointKind::kBundledTrainer ? kTrainerHangTimeoutSeconds : 0;
    if (!v.Empty("hang_timeout")) {
      absl::StatusOr<double> given = v.Seconds("hang_timeout");
      if (!given.ok()) return given.status();
      heartbeat = *given;
    }
    o.hang.heartbeat_timeout = std::chrono::milliseconds(static_cast<long>(heartbeat * 1000.0));
    absl::StatusOr<std::chrono::milliseconds> barrier = v.Duration("exit_barrier_timeout");
    if (!barrier.ok()) return barrier.status();
    o.hang.exit_barrier_timeout = *barrier;
    return absl::OkStatus();
  };
  return group;
}

}  // namespace mxrun
