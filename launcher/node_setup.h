#pragma once
// What one mxrun sets up on its node before the agent starts: its scratch folder (what an mxrun
// that died left behind swept first, scratch_sweep.h; marked with its owner), the per-attempt
// folders, and --numa-binding's plan for each local rank.

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "agent/node/numa_binding.h"
#include "agent/workers/worker_spec.h"
#include "common/env_contract.h"
#include "launcher/launch_flags/launch_options.h"

namespace mxrun {

// $TMPDIR, or /tmp.
std::string TempBase(const EnvMap& env);

// Sweeps the scratch folders of mxruns that are gone, makes this one's (for what lives as long as
// mxrun: the FileTimer pipe, the per-attempt folders unless they are kept) and returns it; the
// caller removes it on every way out (the guardian does, if mxrun is killed). Sets where the
// per-attempt folders go: kept under --log_dir (or a kept temporary folder when --redirects or
// --tee ask for files without one), otherwise in the scratch folder. An error (InvalidArgument)
// says which folder could not be made, and leaves nothing behind.
absl::StatusOr<std::string> SetUpScratch(const LaunchOptions& options, const EnvMap& env,
                                         const std::string& run_id, WorkerSpec& worker);

// --numa-binding: each local rank's CPUs and memory node, said in one line. Never an error: a
// machine hwloc cannot read runs unbound, with the reason.
std::vector<WorkerBinding> PlanBinding(NumaMode mode, const EnvMap& env, int nproc);

}  // namespace mxrun
