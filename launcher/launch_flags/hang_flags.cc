// Hang detection (agent/hang/hang_monitor.h): a silent heartbeat, a round whose worker never
// reports its first step, workers that run on after another one finished (the bundled trainer
// beats, so it is watched by default), and torchrun's knobs in the environment: its FileTimer
// watchdog, its watch on workers in uninterruptible sleep, and how a hung worker's stacks are
// dumped.

#include "absl/strings/str_cat.h"
#include "agent/hang/hang_diagnostics.h"
#include "agent/hang/uninterruptible_watch.h"
#include "launcher/launch_flags/groups.h"

namespace mxrun {

LaunchFlagGroup HangFlags() {
  LaunchFlagGroup group;
  group.flags = {
      {"hang_timeout", "", false,
       "seconds a worker that touched MXRUN_HEARTBEAT_FILE may stay silent before it counts as "
       "hung (0: off; default off, 300 for the bundled trainer)",
       ""},
      {"round_join_timeout", "", false,
       "seconds a worker may take to report its first step in a round after one whose workers "
       "reported steps (an in-process round, a restart) before it counts as hung (0: off; "
       "default: --hang_timeout for a worker kept in-process when on, else 600)",
       ""},
      {"exit_barrier_timeout", "", false,
       "seconds workers may run on after another worker of the job exited 0 before they count "
       "as hung (0: off)",
       "300"},
      EnvSetting("file_timer", "TORCHELASTIC_ENABLE_FILE_TIMER",
                 "1: serve torchrun's file-based watchdog (torch.distributed.elastic.timer) to "
                 "the workers"),
      EnvSetting("file_timer_path", "TORCHELASTIC_TIMER_FILE",
                 "the watchdog's named pipe (default: a private path)"),
      EnvSetting("uninterruptible_timeout", kUninterruptibleTimeoutEnv,
                 "seconds a stopped worker may stay in uninterruptible sleep before it is "
                 "reported (empty, 0 or negative: off), as torchrun reads it"),
      EnvSetting("stack_dumper", "MXRUN_STACK_DUMPER",
                 "what dumps a hung worker's stacks: py-spy, eu-stack, gdb or none (empty: py-spy "
                 "for Python workers when installed, else eu-stack or gdb)"),
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
    if (!v.Empty("round_join_timeout")) {
      absl::StatusOr<std::chrono::milliseconds> join = v.Duration("round_join_timeout");
      if (!join.ok()) return join.status();
      o.hang.round_join_timeout = *join;
    }
    absl::StatusOr<std::chrono::milliseconds> barrier = v.Duration("exit_barrier_timeout");
    if (!barrier.ok()) return barrier.status();
    o.hang.exit_barrier_timeout = *barrier;

    // torchrun's watchdog: at TORCHELASTIC_TIMER_FILE when set, else a private path.
    o.file_timer = v.Text("file_timer") == "1";
    o.file_timer_path = v.Text("file_timer_path");
    if (v.Given("uninterruptible_timeout")) {
      absl::StatusOr<std::chrono::milliseconds> timeout =
          ParseUninterruptibleTimeout(v.Text("uninterruptible_timeout"));
      if (timeout.ok()) {
        o.uninterruptible_timeout = *timeout;
      } else {  // as torchrun: a warning, and no watch
        v.Warn(absl::StrCat(timeout.status().message(),
                            ": workers in uninterruptible sleep are not watched (as under "
                            "torchrun)"));
      }
    }
    if (v.Given("stack_dumper")) {
      o.stack_dumper = v.Text("stack_dumper");
      if (!IsStackDumper(o.stack_dumper)) {
        return absl::InvalidArgumentError(
            absl::StrCat("MXRUN_STACK_DUMPER='", o.stack_dumper,
                         "' is not valid; accepted: py-spy, eu-stack, "
                         "gdb, none (empty: choose)"));
      }
    }
    return absl::OkStatus();
  };
  return group;
}

}  // namespace mxrun
