// torchelastic's event records (agent/event_log.h).

#include "agent/event_log.h"
#include "launcher/launch_flags/groups.h"

namespace mxrun {

LaunchFlagGroup EventFlags() {
  LaunchFlagGroup group;
  group.flags = {
      {"event_log_handler", "", false,
       "torchelastic's event records (rendezvous, worker starts, failures, restarts): null "
       "(none) or console (JSON on stderr)",
       "null"},
  };
  group.apply = [](const FlagValues& v, LaunchOptions& o) -> absl::Status {
    o.event_log_handler = v.Lower("event_log_handler");
    if (!IsEventLogHandler(o.event_log_handler)) {
      return v.Invalid("event_log_handler",
                       "unknown event handler (mxrun has torchelastic's built-in ones, and cannot "
                       "load Python handlers registered at run time)",
                       "null, console");
    }
    return absl::OkStatus();
  };
  return group;
}

}  // namespace mxrun
