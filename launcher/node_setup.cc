#include "launcher/node_setup.h"

#include <errno.h>
#include <limits.h>
#include <sched.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "agent/node/gpu_devices.h"
#include "agent/node/numa_topology.h"
#include "common/files.h"
#include "common/strings.h"
#include "launcher/scratch_sweep.h"
#include "spdlog/spdlog.h"

namespace mxrun {

std::string TempBase(const EnvMap& env) {
  auto it = env.find("TMPDIR");
  return it != env.end() && !it->second.empty() ? it->second : "/tmp";
}

namespace {

std::string Absolute(const std::string& path) {
  if (path.empty() || path[0] == '/') return path;
  char cwd[PATH_MAX];
  if (getcwd(cwd, sizeof cwd) == nullptr) return path;
  return absl::StrCat(cwd, "/", path);
}

absl::StatusOr<std::string> MakeTempDir(const std::string& templ) {
  std::string buffer = templ + "XXXXXX";
  if (mkdtemp(buffer.data()) == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot create the folder ", buffer, ": ", ErrnoText(errno)));
  }
  return buffer;
}

// The CPUs this process may run on (its affinity) and the memory nodes it may use.
AllowedResources OwnResources() {
  AllowedResources own;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) {
    for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
      if (CPU_ISSET(cpu, &set)) own.cpus.push_back(cpu);
    }
  }
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);) {
    if (absl::StartsWith(line, "Mems_allowed_list:")) {
      own.memory_nodes = ParseCpuList(line.substr(line.find(':') + 1));
    }
  }
  return own;
}

}  // namespace

std::vector<WorkerBinding> PlanBinding(NumaMode mode, const EnvMap& env, int nproc) {
  // The workers' GPUs first (NVML), so that hwloc places only those; with a saved topology
  // (HWLOC_XMLFILE) the GPUs are that topology's.
  const bool saved = env.count("HWLOC_XMLFILE") > 0;
  std::vector<std::string> gpus =
      saved ? std::vector<std::string>() : WorkerGpuBusIds(env, nproc, {});
  if (!saved && std::all_of(gpus.begin(), gpus.end(), [](auto& gpu) { return gpu.empty(); })) {
    // Nothing to place: the topology is not even loaded.
    spdlog::info(
        "numa binding ({}): no GPU found for the {} worker(s) (the NVIDIA driver's NVML "
        "reports none for CUDA_VISIBLE_DEVICES' entries or the local ranks): workers not "
        "bound",
        NumaModeName(mode), nproc);
    return {};
  }
  absl::StatusOr<NumaTopology> topology = LoadMachineTopology(gpus);
  if (!topology.ok()) {
    spdlog::warn("numa binding ({}): {}; workers not bound", NumaModeName(mode),
                 std::string(topology.status().message()));
    return {};
  }
  if (saved) gpus = WorkerGpuBusIds(env, nproc, *topology);
  NumaPlan plan = PlanNumaBinding(*topology, gpus, mode, OwnResources());
  spdlog::info("{}", plan.summary);
  return plan.workers;
}

absl::StatusOr<std::string> SetUpScratch(const LaunchOptions& options, const EnvMap& env,
                                         const std::string& run_id, WorkerSpec& worker) {
  for (const std::string& orphan : SweepOrphanedScratch(TempBase(env))) {
    spdlog::info("removed {}, the scratch folder of an mxrun that is gone", orphan);
  }
  absl::StatusOr<std::string> scratch = MakeTempDir(TempBase(env) + "/mxrun-");
  if (!scratch.ok()) return scratch.status();
  MarkScratchOwner(*scratch, getpid());
  if (!worker.logs.NeedsFiles()) {
    worker.attempts_dir = *scratch;
    return scratch;
  }
  // Absolute, so that the paths in workers' variables and in the summary mean the same wherever
  // they are read.
  std::string base =
      Absolute(options.logs.log_dir.empty() ? TempBase(env) + "/mxrun-logs" : options.logs.log_dir);
  MakeDirs(base);
  absl::StatusOr<std::string> dir = MakeTempDir(absl::StrCat(base, "/", run_id, "_"));
  if (!dir.ok()) {
    RemoveTree(*scratch);
    return absl::InvalidArgumentError(absl::StrCat("--log_dir: ", dir.status().message()));
  }
  worker.attempts_dir = *dir;
  worker.attempts_dir_kept = true;
  spdlog::info("worker logs: {}/attempt_<N>/<local_rank>/", worker.attempts_dir);
  return scratch;
}

}  // namespace mxrun
