// Waiting for the old workers' GPU memory before a new group starts (agent/node/gpu_reclaim.h).

#include "launcher/launch_flags/groups.h"

namespace mxrun {

LaunchFlagGroup GpuReclaimFlags() {
  LaunchFlagGroup group;
  group.flags = {
      {"gpu_reclaim_timeout", "", false,
       "before a new group starts on GPUs the last one used, wait at most this many seconds for "
       "the old workers' memory there to be released (NVML; 0: never wait)",
       "50"},
      {"gpu_reclaim_threshold", "", false,
       "... until each GPU's used memory is at most this many MiB (when no other process is "
       "listed there) and no old worker holds any",
       "512"},
      {"gpu_reclaim_interval", "", false, "... asking NVML every this many seconds", "2"},
  };
  group.apply = [](const FlagValues& v, LaunchOptions& o) -> absl::Status {
    absl::StatusOr<std::chrono::milliseconds> timeout = v.Duration("gpu_reclaim_timeout");
    if (!timeout.ok()) return timeout.status();
    absl::StatusOr<int> threshold =
        v.Int("gpu_reclaim_threshold", 0, 10'000'000, "0 to 10000000 MiB");
    if (!threshold.ok()) return threshold.status();
    absl::StatusOr<double> interval = v.Seconds("gpu_reclaim_interval");
    if (!interval.ok()) return interval.status();
    if (*interval < 0.01 || *interval > 60) {
      return v.Invalid("gpu_reclaim_interval", "out of range", "0.01 to 60 seconds");
    }
    o.agent.gpu_reclaim.timeout = *timeout;
    o.agent.gpu_reclaim.threshold_bytes = static_cast<unsigned long long>(*threshold) << 20;
    o.agent.gpu_reclaim.interval =
        std::chrono::milliseconds(static_cast<long long>(*interval * 1000));
    return absl::OkStatus();
  };
  return group;
}

}  // namespace mxrun
