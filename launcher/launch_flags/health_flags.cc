// The node's health checks before each join and on a period (agent/node/health_check.h). The GPUs
// to check are the launcher's to add: they follow from --nproc_per_node on this machine.

#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "launcher/launch_flags/groups.h"

namespace mxrun {

LaunchFlagGroup HealthFlags() {
  LaunchFlagGroup group;
  group.flags = {
      {"health_checks", "", false,
       "check the node before each join (its GPUs through NVML, its folders, --local_addr, "
       "--health_check); an unhealthy node does not join and exits 93: on or off",
       "on"},
      {"health_check", "", false,
       "a command (sh -c) that checks the node too: exit 0 healthy, else unhealthy (its last "
       "output line says why), as Slurm's HealthCheckProgram",
       ""},
      {"health_check_timeout", "", false, "seconds --health_check may take (else unhealthy)", "60"},
      {"health_check_interval", "", false,
       "also check every this many seconds while the workers run (0: before joins only)", "0"},
      {"health_folders", "", false,
       "folders that must be writable with --health_min_disk free (comma-separated; --log_dir "
       "always is), such as the checkpoint folder",
       ""},
      {"health_min_disk", "", false, "MiB free needed in those folders", "1024"},
      {"health_min_gpu_free", "", false, "MiB of free memory needed on each GPU", "1024"},
  };
  group.apply = [](const FlagValues& v, LaunchOptions& o) -> absl::Status {
    HealthCheckConfig& health = o.agent.health;
    const std::string on = v.Lower("health_checks");
    if (on != "on" && on != "off") {
      return v.Invalid("health_checks", "neither on nor off", "on or off");
    }
    health.enabled = on == "on";
    health.command = v.Trimmed("health_check");
    absl::StatusOr<double> timeout = v.Seconds("health_check_timeout");
    if (!timeout.ok()) return timeout.status();
    if (*timeout <= 0) return v.Invalid("health_check_timeout", "not above 0", "seconds above 0");
    health.command_timeout = std::chrono::milliseconds(static_cast<long long>(*timeout * 1000));
    absl::StatusOr<std::chrono::milliseconds> interval = v.Duration("health_check_interval");
    if (!interval.ok()) return interval.status();
    health.interval = *interval;
    health.folders.clear();
    if (!v.Text("log_dir").empty()) health.folders.push_back(v.Text("log_dir"));
    for (absl::string_view folder :
         absl::StrSplit(v.Text("health_folders"), ',', absl::SkipWhitespace())) {
      health.folders.emplace_back(absl::StripAsciiWhitespace(folder));
    }
    absl::StatusOr<int> disk = v.Int("health_min_disk", 0, 100'000'000, "0 to 100000000 MiB");
    if (!disk.ok()) return disk.status();
    absl::StatusOr<int> gpu_free = v.Int("health_min_gpu_free", 0, 10'000'000, "0 to 10000000 MiB");
    if (!gpu_free.ok()) return gpu_free.status();
    health.min_free_disk_bytes = static_cast<unsigned long long>(*disk) << 20;
    health.min_free_gpu_bytes = static_cast<unsigned long long>(*gpu_free) << 20;
    health.address = v.Text("local_addr");
    return absl::OkStatus();
  };
  return group;
}

}  // namespace mxrun
