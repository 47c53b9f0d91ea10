// Spare workers for in-process restarts (agent/workers/worker_group.h) and, for an ordinary Python
// script, pre-started interpreters (python/mxrun/_prestart.py, launcher/prestart.h).

#include "launcher/launch_flags/groups.h"

namespace mxrun {

LaunchFlagGroup StandbyFlags() {
  LaunchFlagGroup group;
  group.flags = {
      {"standby_workers", "", false,
       "spare workers per node, started and loaded ahead, that replace a failed rank in an "
       "in-process restart (default 1 for the bundled trainer, else 0)",
       ""},
      {"prestart", "", true,
       "Python scripts: keep one interpreter per local rank started ahead with torch imported "
       "(the mxrun Python module's mxrun._prestart); a restarted group runs the script in them",
       ""},
  };
  group.apply = [](const FlagValues& v, LaunchOptions& o) -> absl::Status {
    const bool virtual_local_rank = v.Bool("virtual_local_rank");
    // The bundled trainer can be a standby (it loads, then waits for a rank); not with
    // --virtual_local_rank, where a standby's GPU would be fixed before it knows its rank.
    o.standby_workers =
        o.entrypoint_kind == EntrypointKind::kBundledTrainer && !virtual_local_rank ? 1 : 0;
    const bool standby_given = !v.Empty("standby_workers");
    if (standby_given) {
      absl::StatusOr<int> standby = v.Int("standby_workers", 0, 64, "an integer from 0 to 64");
      if (!standby.ok()) return standby.status();
      o.standby_workers = *standby;
      if (virtual_local_rank && *standby > 0) {
        return v.Invalid("standby_workers",
                         "with --virtual_local_rank a worker's GPU is fixed when it starts, and a "
                         "standby starts before it knows which rank (and GPU) it will take",
                         "0 with --virtual_local_rank");
      }
    }
    o.prestart = v.Bool("prestart");
    if (o.prestart && o.entrypoint_kind != EntrypointKind::kPythonScript &&
        o.entrypoint_kind != EntrypointKind::kPythonModule) {
      return v.Invalid("prestart", "it pre-starts Python interpreters",
                       "a Python script or -m module as the entrypoint (not --no_python or "
                       "'train')");
    }
    if (o.prestart && standby_given && o.standby_workers > 0) {
      return v.Invalid("standby_workers",
                       "with --prestart the standbys are the pre-started interpreters, one per "
                       "local rank",
                       "--prestart, or --standby_workers with a script that uses mxrun.run");
    }
    return absl::OkStatus();
  };
  return group;
}

}  // namespace mxrun
