#pragma once
// GPU memory reclaimed before a respawn (issue 27): a worker that died may leave its memory on the
// GPU for a while (the driver frees it once every process holding it is gone; a zombie or a stuck
// child keeps it). New workers started on it then fail with out-of-memory. Before starting a new
// group on GPUs it used, the agent polls NVML (every `interval`, at most `timeout`) until, on each
// of those GPUs, no process of the old group holds memory and the memory used is at most
// `threshold_bytes` (NVIDIA's resiliency launcher waits the same way: 50 s, 512 MB, 2 s; the used
// memory counts only when no other process is listed on the GPU: another job's memory is not
// this job's to wait for, while NVML cannot list processes of other PID namespaces). Then it
// says what it waited for; when the time is up it names who still holds the GPU (a zombie, a
// process of the old group still alive, or something else) and starts anyway.
//
// Pure over a GpuReader and an injected clock and sleep (tests use a fake; the agent NVML).

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "agent/node/nvml.h"

namespace mxrun {

struct GpuReclaimConfig {
  std::chrono::milliseconds timeout{50'000};          // --gpu_reclaim_timeout (0: never wait)
  unsigned long long threshold_bytes = 512ull << 20;  // --gpu_reclaim_threshold (MiB)
  std::chrono::milliseconds interval{2'000};          // --gpu_reclaim_interval
};

// One GPU as NVML sees it now.
struct GpuState {
  std::string name;  // the CUDA_VISIBLE_DEVICES entry ("0", "GPU-...")
  unsigned long long used_bytes = 0;
  std::vector<GpuProcess> processes;
};

class GpuReader {
 public:
  virtual ~GpuReader() = default;
  // The GPUs named by these CUDA_VISIBLE_DEVICES entries; nullopt when there is no NVML or GPU
  // to ask (then nothing is waited for).
  virtual std::optional<std::vector<GpuState>> Read(const std::vector<std::string>& entries) = 0;
};

// NVML's answers (agent/node/nvml.h); no GPU, no NVML: nullopt.
class NvmlGpuReader : public GpuReader {
 public:
  std::optional<std::vector<GpuState>> Read(const std::vector<std::string>& entries) override;

 private:
  Nvml nvml_;
};

struct GpuReclaimHooks {
  std::function<std::chrono::steady_clock::time_point()> now;
  std::function<void(std::chrono::milliseconds)> sleep;
  std::function<bool()> stop;                      // a stop signal came: give up waiting
  std::function<std::string(pid_t)> describe_pid;  // "state Z (a zombie)" and the like
};

struct GpuReclaimOutcome {
  bool waited = false;    // something was held at first
  bool released = false;  // ... and it was let go in time
  double seconds = 0;
  std::string text;  // one line for the log ("" when nothing was waited for)
};

// `old_workers`: the pids of the group that ended (pid -> global rank), which may not hold memory.
GpuReclaimOutcome WaitForGpuMemory(GpuReader& reader, const std::vector<std::string>& entries,
                                   const std::map<pid_t, int>& old_workers,
                                   const GpuReclaimConfig& config, const GpuReclaimHooks& hooks);

// The real hooks: the steady clock, a sleep, and a stop as soon as one of `stop_signals` is
// pending (the caller's loop does not run while this waits, so its signalfd reads nothing).
GpuReclaimHooks SystemReclaimHooks(std::set<int> stop_signals);

// Before a respawn, for the agent: waits (WaitForGpuMemory, with the real hooks) until the GPUs of
// `entries` no longer hold the ended workers' memory, NVML loaded at the first call, and logs
// the outcome in one line. Nothing when it is off (timeout 0), with no GPUs or no ended workers.
class GpuMemoryReclaimer {
 public:
  GpuMemoryReclaimer(GpuReclaimConfig config, std::vector<std::string> entries,
                     std::set<int> stop_signals)
      : config_(config), entries_(std::move(entries)), stop_signals_(std::move(stop_signals)) {}
  void Reclaim(const std::map<pid_t, int>& ended_workers);

 private:
  GpuReclaimConfig config_;
  std::vector<std::string> entries_;
  std::set<int> stop_signals_;
  std::unique_ptr<GpuReader> reader_;
};

// "state Z (a zombie: its parent has not reaped it)", "running", "gone" from /proc/<pid>/stat.
std::string DescribeProcessState(pid_t pid);

}  // namespace mxrun
