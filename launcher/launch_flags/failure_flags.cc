// What a failure does beyond a restart: the exit code that tells a scheduler not to requeue a job
// that failed the same way every time (common/repeated_failure.h), and whether a straggler counts
// as a failure.

#include "launcher/launch_flags/groups.h"

namespace mxrun {

LaunchFlagGroup FailureFlags() {
  LaunchFlagGroup group;
  group.flags = {
      {"do_not_requeue_exit_code", "", false,
       "exit with this code, not 1, when every attempt failed the same way (same exit code and "
       "error): a scheduler should not requeue the job (0: exit 1 as for any failure)",
       "93"},
      {"straggler_restart", "", true,
       "restart the worker group when a rank is named a straggler (spends a restart; default: "
       "only name it)",
       ""},
      EnvSetting("agent_error_file", "TORCHELASTIC_ERROR_FILE",  // mxrun's own, as torchrun's
                 "where mxrun writes its own error, as a JSON error file like torchrun's agent"),
  };
  group.apply = [](const FlagValues& v, LaunchOptions& o) -> absl::Status {
    absl::StatusOr<int> code =
        v.Int("do_not_requeue_exit_code", 0, 125, "0 (off) or an exit code from 4 to 125");
    if (!code.ok()) return code.status();
    if (*code >= 1 && *code <= 3) {
      return v.Invalid("do_not_requeue_exit_code",
                       "taken by another meaning (1 failed, 2 "
                       "usage, 3 rendezvous)",
                       "0 (off) or an exit code from 4 to 125");
    }
    o.agent.do_not_requeue_exit_code = *code;
    o.agent.agent_error_file = v.Text("agent_error_file");
    o.agent.straggler_restart = v.Bool("straggler_restart");
    if (o.agent.straggler_restart && o.agent.stragglers.steps == 0) {
      return absl::InvalidArgumentError(
          "--straggler_restart needs stragglers to be judged: --straggler_steps must be above 0");
    }
    return absl::OkStatus();
  };
  return group;
}

}  // namespace mxrun
