// Where a worker runs (torchrun 2.x): one GPU per worker's view, and NUMA binding near its GPU
// (agent/node/numa_binding.h).

#include "launcher/launch_flags/groups.h"

namespace mxrun {

LaunchFlagGroup PlacementFlags() {
  LaunchFlagGroup group;
  group.flags = {
      {"virtual_local_rank", "", true,
       "each worker sees only its own GPU: LOCAL_RANK=0 and CUDA_VISIBLE_DEVICES naming its entry "
       "of the agent's list (or its index) (torchrun 2.x)",
       ""},
      {"numa_binding", "", false,
       "bind each worker's CPUs and memory near its GPU, found with hwloc: node, socket, "
       "exclusive or core-complex (none: no binding)",
       ""},
  };
  group.apply = [](const FlagValues& v, LaunchOptions& o) -> absl::Status {
    o.virtual_local_rank = v.Bool("virtual_local_rank");
    const std::string mode = v.Lower("numa_binding");
    if (!mode.empty() && mode != "none") {
      o.numa_binding = ParseNumaMode(mode);
      if (!o.numa_binding) {
        return v.Invalid("numa_binding", "unknown mode",
                         "node, socket, exclusive or core-complex (or none)");
      }
    }
    return absl::OkStatus();
  };
  return group;
}

}  // namespace mxrun
