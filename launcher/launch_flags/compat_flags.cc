// torchrun's flags that mxrun accepts with their default only, so that a torchrun command line
// runs unchanged.

#include "launcher/launch_flags/groups.h"

namespace mxrun {

LaunchFlagGroup CompatFlags() {
  LaunchFlagGroup group;
  group.flags = {
      {"logs_specs", "", false,
       "accepted for torchrun compatibility with its default only: mxrun cannot load Python entry "
       "points (use --log_dir, --redirects, --tee, --log_format)",
       ""},
      {"start_method", "", false, "accepted for torchrun compatibility (spawn, fork, forkserver)",
       "spawn"},
  };
  group.apply = [](const FlagValues& v, LaunchOptions&) -> absl::Status {
    // torchrun 2.x loads a Python class from the `torchrun.logs_specs` entry-point group here; a
    // C++ launcher cannot, so only the default is accepted, and anything else says what to use.
    if (!v.Empty("logs_specs")) {
      return v.Invalid("logs_specs",
                       "mxrun cannot load torchrun.logs_specs entry points "
                       "(Python classes)",
                       "nothing (the default); for log files and streams use --log_dir, "
                       "-r/--redirects, -t/--tee, --local_ranks_filter or --log_format=json");
    }
    return absl::OkStatus();
  };
  return group;
}

}  // namespace mxrun
