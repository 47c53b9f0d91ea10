#pragma once
// Node health checks (issue 27): before each join (and with --health_check_interval while its
// workers run) an agent checks its node, and an unhealthy node does not join: it says why in one
// line, tells the master (whose status lists it), and exits with the "do not requeue" code. The
// checks, each skipped where it does not apply:
//   - the GPUs of its workers (CUDA_VISIBLE_DEVICES, or the local ranks) through NVML: visible,
//     no retired memory pages pending, no row remap pending or failed, enough free memory, no XID
//     error reported since the last check (from the first check on; XIDs an application causes,
//     13, 31, 43 and 45, do not count); with no NVML or no GPU nothing is asked;
//   - the folders it writes (--log_dir, --health_folders): a file can be made there, and there is
//     free space;
//   - the address it advertises (--local_addr): it belongs to this machine (a socket binds to it);
//   - the user's check (--health_check CMD, run with sh -c, bounded by --health_check_timeout):
//     exit 0 is healthy, anything else unhealthy with its last output line, as Slurm's
//     HealthCheckProgram.

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "agent/node/nvml.h"

namespace mxrun {

struct HealthCheckConfig {
  bool enabled = true;                                  // --health_checks=off: none at all
  std::string command;                                  // --health_check
  std::chrono::milliseconds command_timeout{60'000};    // --health_check_timeout
  std::chrono::milliseconds interval{0};                // --health_check_interval (0: joins only)
  std::vector<std::string> folders;                     // --log_dir, --health_folders
  unsigned long long min_free_disk_bytes = 1ull << 30;  // --health_min_disk (MiB)
  unsigned long long min_free_gpu_bytes = 1ull << 30;   // --health_min_gpu_free (MiB)
  std::string address;                                  // --local_addr ("": not checked)
  std::vector<std::string> gpu_entries;                 // the workers' GPUs
  // The entries are local ranks (no CUDA_VISIBLE_DEVICES): a rank at or beyond the driver's
  // GPU count is a worker without a GPU of its own (more workers than GPUs, as torchrun allows),
  // not a GPU gone missing. Entries CUDA_VISIBLE_DEVICES names must all be there.
  bool gpu_entries_are_local_ranks = false;
};

class HealthChecker {
 public:
  explicit HealthChecker(HealthCheckConfig config);
  ~HealthChecker();
  // Every problem found now, one phrase each ("GPU 0: retired memory pages pending (a driver
  // reload is needed)"); empty when healthy.
  std::vector<std::string> Check();
  const HealthCheckConfig& config() const { return config_; }

 private:
  void CheckGpus(std::vector<std::string>& problems);
  void CheckFolders(std::vector<std::string>& problems) const;
  void CheckAddress(std::vector<std::string>& problems) const;
  void RunCommand(std::vector<std::string>& problems) const;

  HealthCheckConfig config_;
  std::unique_ptr<Nvml> nvml_;  // loaded at the first check that has GPUs to ask about
  std::vector<std::pair<Nvml::Device, std::string>> watched_;  // devices whose XIDs are watched
};

}  // namespace mxrun
