// How the workers are stopped: the signals mxrun forwards, and the grace period before SIGKILL.

#include <csignal>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/signal_names.h"
#include "launcher/launch_flags/groups.h"

namespace mxrun {

LaunchFlagGroup StopFlags() {
  LaunchFlagGroup group;
  group.flags = {
      {"signals_to_handle", "", false, "signals forwarded to the workers",
       "SIGTERM,SIGINT,SIGHUP,SIGQUIT"},
      {"term_timeout", "", false, "seconds each worker gets after the stop signal before SIGKILL",
       "30"},
      {"shutdown_timeout", "", false,
       "torchrun 2.x's name for --term_timeout (also TORCH_ELASTIC_SHUTDOWN_TIMEOUT); the two "
       "are one setting and must agree when both are given",
       "", true, "TORCH_ELASTIC_SHUTDOWN_TIMEOUT"},
      // Under Slurm the grace must end before KillWait's SIGKILL (slurm_kill_wait.h).
      EnvSetting("slurm_job_id", "SLURM_JOB_ID",
                 "set by Slurm: the workers' stop grace, unless given, then ends before Slurm's "
                 "KillWait, and a "
                 "worker killed by scancel waits for mxrun's own signal before it counts as "
                 "failed"),
      // Started by systemd: a stop signals every process of the unit's cgroup.
      EnvSetting("systemd_invocation_id", "INVOCATION_ID",
                 "set by systemd: a worker killed by `systemctl stop` waits for mxrun's own "
                 "signal before it counts as failed"),
  };
  group.apply = [](const FlagValues& v, LaunchOptions& o) -> absl::Status {
    for (absl::string_view name :
         absl::StrSplit(v.Text("signals_to_handle"), ',', absl::SkipWhitespace())) {
      std::optional<int> signo = ParseSignal(name);
      if (!signo || *signo == SIGKILL || *signo == SIGSTOP || *signo == SIGCHLD) {
        return v.Invalid("signals_to_handle", absl::StrCat("'", name, "' cannot be handled"),
                         "signal names or numbers such as SIGTERM,SIGINT (not SIGKILL, SIGSTOP, "
                         "SIGCHLD)");
      }
      o.agent.handled_signals.insert(*signo);
    }
    o.signals_to_handle_text = v.Text("signals_to_handle");

    absl::StatusOr<double> term = v.Seconds("term_timeout");
    if (!term.ok()) return term.status();
    double grace = *term;
    const bool grace_given = v.Given("term_timeout") || v.Given("shutdown_timeout");
    // One grace period, two names: torchrun 2.x's --shutdown_timeout stands in for --term_timeout;
    // given both (from any sources), they must say the same.
    if (v.Given("shutdown_timeout")) {
      absl::StatusOr<double> shutdown = v.Seconds("shutdown_timeout");
      if (!shutdown.ok()) return shutdown.status();
      if (v.Given("term_timeout") && *shutdown != *term) {
        return absl::InvalidArgumentError(absl::StrCat(
            v["shutdown_timeout"].source, "='", v.Text("shutdown_timeout"), "' and ",
            v["term_timeout"].source, "='", v.Text("term_timeout"),
            "' disagree: they are one setting (the grace period before SIGKILL); give one"));
      }
      grace = *shutdown;
    }
    o.agent.term_timeout = std::chrono::milliseconds(static_cast<long>(grace * 1000.0));
    o.grace_fits_kill_wait = v.Given("slurm_job_id") && !grace_given;
    // scancel and `systemctl stop` signal the workers as well as mxrun, one process after
    // another: a worker may die of that SIGTERM before mxrun has its own. Such a death waits
    // this long for mxrun's own signal before it counts as the worker's failure
    // (elastic_agent.h, AgentSettings::await_own_stop_signal).
    if (v.Given("slurm_job_id") || v.Given("systemd_invocation_id")) {
      o.agent.await_own_stop_signal = std::chrono::milliseconds(1000);
    }
    return absl::OkStatus();
  };
  return group;
}

}  // namespace mxrun
