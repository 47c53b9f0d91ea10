#include "agent/node/gpu_reclaim.h"

#include <signal.h>

#include <fstream>
#include <sstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "spdlog/spdlog.h"

namespace mxrun {

namespace {

double MiB(unsigned long long bytes) { return static_cast<double>(bytes) / (1 << 20); }

// What still holds `gpu`, in words; "" when it is free enough.
std::string StillHeld(const GpuState& gpu, const std::map<pid_t, int>& old_workers,
                      const GpuReclaimConfig& config, const GpuReclaimHooks& hooks,
                      bool name_everyone) {
  std::vector<std::string> holders;
  bool old_worker_holds = false;
  bool stranger_holds = false;
  for (const GpuProcess& p : gpu.processes) {
    auto worker = old_workers.find(p.pid);
    if (worker != old_workers.end()) old_worker_holds = true;
    if (worker == old_workers.end()) stranger_holds = true;
    if (worker == old_workers.end() && !name_everyone) continue;
    std::string who = absl::StrCat("pid ", p.pid);
    if (worker != old_workers.end()) {
      absl::StrAppend(&who, " (rank ", worker->second, "'s worker, ", hooks.describe_pid(p.pid),
                      ")");
    } else {
      absl::StrAppend(&who, " (not a worker of this job, ", hooks.describe_pid(p.pid), ")");
    }
    if (p.used_bytes > 0)
      absl::StrAppend(&who, " with ", absl::StrFormat("%.0f", MiB(p.used_bytes)), " MiB");
    holders.push_back(who);
  }
  // Memory above the threshold is waited for only when nobody listed explains it: NVML cannot
  // list processes of other PID namespaces (containers), and leftovers of the old group are then
  // seen in the used memory alone. Another job's process listed there is that job's business.
  if (!old_worker_holds && (gpu.used_bytes <= config.threshold_bytes || stranger_holds)) return "";
  std::string text = absl::StrCat("GPU ", gpu.name, ": ",
                                  absl::StrFormat("%.0f", MiB(gpu.used_bytes)), " MiB used");
  if (!holders.empty()) absl::StrAppend(&text, ", held by ", absl::StrJoin(holders, ", "));
  return text;
}

}  // namespace

std::optional<std::vector<GpuState>> NvmlGpuReader::Read(const std::vector<std::string>& entries) {
  if (!nvml_.ready() || entries.empty()) return std::nullopt;
  std::vector<GpuState> gpus;
  for (const std::string& entry : entries) {
    std::optional<Nvml::Device> device = nvml_.Find(entry);
    if (!device) continue;  // not an NVIDIA GPU this NVML knows: nothing to wait for there
    GpuState state;
    state.name = entry;
    state.used_bytes = nvml_.UsedBytes(*device).value_or(0);
    state.processes = nvml_.ComputeProcesses(*device).value_or(std::vector<GpuProcess>{});
    gpus.push_back(std::move(state));
  }
  if (gpus.empty()) return std::nullopt;
  return gpus;
}

GpuReclaimOutcome WaitForGpuMemory(GpuReader& reader, const std::vector<std::string>& entries,
                                   const std::map<pid_t, int>& old_workers,
                                   const GpuReclaimConfig& config, const GpuReclaimHooks& hooks) {
  GpuReclaimOutcome outcome;
  if (config.timeout.count() <= 0) return outcome;
  const auto start = hooks.now();
  std::string first;  // what was held when the wait began
  for (;;) {
    std::optional<std::vector<GpuState>> gpus = reader.Read(entries);
    if (!gpus) return outcome;  // no GPU here (or no NVML): nothing to wait for
    std::vector<std::string> held;
    for (const GpuState& gpu : *gpus) {
      std::string h = StillHeld(gpu, old_workers, config, hooks, /*name_everyone=*/false);
      if (!h.empty()) held.push_back(std::move(h));
    }
    const double waited = std::chrono::duration<double>(hooks.now() - start).count();
    if (held.empty()) {
      if (outcome.waited) {
        outcome.released = true;
        outcome.seconds = waited;
        outcome.text = absl::StrCat("GPU memory released after ", absl::StrFormat("%.1f", waited),
                                    " s (it was ", first, ")");
      }
      return outcome;
    }
    if (!outcome.waited) {
      outcome.waited = true;
      first = absl::StrJoin(held, "; ");
    }
    if (hooks.now() - start >= config.timeout || hooks.stop()) {
      // Who holds it, everyone named: a zombie or a stranger is what the operator must see.
      std::vector<std::string> named;
      for (const GpuState& gpu : *gpus) {
        std::string h = StillHeld(gpu, old_workers, config, hooks, /*name_everyone=*/true);
        if (!h.empty()) named.push_back(std::move(h));
      }
      outcome.seconds = waited;
      outcome.text = absl::StrCat("GPU memory still held after ", absl::StrFormat("%.1f", waited),
                                  " s (", hooks.stop() ? "stopping" : "--gpu_reclaim_timeout",
                                  "): ", absl::StrJoin(named, "; "),
                                  "; starting the workers anyway (they may run out of GPU memory)");
      return outcome;
    }
    hooks.sleep(config.interval);
  }
}

std::string DescribeProcessState(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text;
  if (!std::getline(stat, text)) return "gone";
  const size_t close = text.rfind(')');
  if (close == std::string::npos || close + 2 >= text.size()) return "unknown state";
  const char state = text[close + 2];
  switch (state) {
    case 'Z':
      return "state Z: a zombie, its parent has not reaped it";
    case 'D':
      return "state D: in uninterruptible sleep";
    case 'T':
    case 't':
      return "state T: stopped";
    default:
      return absl::StrCat("state ", std::string(1, state), ": alive");
  }
}

GpuReclaimHooks SystemReclaimHooks(std::set<int> stop_signals) {
  GpuReclaimHooks hooks;
  hooks.now = [] { return std::chrono::steady_clock::now(); };
  hooks.sleep = [](std::chrono::milliseconds d) { std::this_thread::sleep_for(d); };
  hooks.stop = [stop_signals = std::move(stop_signals)] {
    sigset_t pending;
    sigemptyset(&pending);
    if (sigpending(&pending) != 0) return false;
    for (int signo : stop_signals) {
      if (sigismember(&pending, signo) == 1) return true;
    }
    return false;
  };
  hooks.describe_pid = DescribeProcessState;
  return hooks;
}

void GpuMemoryReclaimer::Reclaim(const std::map<pid_t, int>& ended_workers) {
  if (ended_workers.empty() || entries_.empty() || config_.timeout.count() <= 0) return;
  if (!reader_) reader_ = std::make_unique<NvmlGpuReader>();
  const GpuReclaimOutcome outcome = WaitForGpuMemory(*reader_, entries_, ended_workers, config_,
                                                     SystemReclaimHooks(stop_signals_));
  if (!outcome.text.empty()) {
    spdlog::log(outcome.released ? spdlog::level::info : spdlog::level::warn, "{}", outcome.text);
  }
}

}  // namespace mxrun
