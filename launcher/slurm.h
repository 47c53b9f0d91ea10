#pragma once
// Running inside a Slurm allocation: the flags mxrun can infer from SLURM_* variables, so that
// `srun mxrun --nproc_per_node=gpu train.py` needs no per-node arguments.

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace mxrun {

// Expands a Slurm hostlist expression into host names, in order: "gpu[01-04,07]" gives gpu01,
// gpu02, gpu03, gpu04, gpu07; "a[1-2]-b[1-2]" gives a1-b1, a1-b2, a2-b1, a2-b2; top-level commas
// separate expressions ("login1,gpu[1-2]"). Zero padding follows the range's first number.
// Malformed expressions (unbalanced brackets, descending or non-numeric ranges, empty items) and
// lists of more than kMaxHostlistHosts hosts are errors that quote the expression.
inline constexpr int kMaxHostlistHosts = 65536;
absl::StatusOr<std::vector<std::string>> ExpandHostlist(absl::string_view expression);

// What Slurm tells a launcher, as flag values (text, as on a command line).
struct SlurmDefaults {
  std::string job_id;
  std::map<std::string, std::string> flags;  // flag name -> value: nnodes, node_rank,
                                             // rdzv_backend, rdzv_endpoint, rdzv_id, nproc_per_node
};

// nullopt when SLURM_JOB_ID is not set. Otherwise the flags Slurm implies: --nnodes from
// SLURM_NNODES (or SLURM_JOB_NUM_NODES), --node_rank from SLURM_NODEID, --nproc_per_node from
// SLURM_GPUS_ON_NODE when that is a positive count, and, when the job has more than one node, a
// c10d rendezvous on the first host of SLURM_JOB_NODELIST (or SLURM_NODELIST) at the default port
// (kDefaultRendezvousPort, 29400) with --rdzv_id from the job id (a one-node job keeps the
// single-node path). A variable that is present but malformed is an error naming it.
absl::StatusOr<std::optional<SlurmDefaults>> DetectSlurm(
    const std::map<std::string, std::string>& env);

}  // namespace mxrun
