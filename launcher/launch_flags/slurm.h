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

// A multi-node Slurm job's rendezvous port, derived from its job id so that jobs whose first node
// is the same meet at different ports: kSlurmRendezvousPortBase + (id x candidates) mod span, where
// the id is SLURM_JOB_ID's number (a hash of the text if it is not one). Consecutive jobs get
// disjoint blocks of kSlurmRendezvousPortCandidates ports; the agent that hosts the master takes
// the first free one of its block, and the other agents find it by asking each which run it serves
// (a master an agent hosts serves its own run only). The span lies below Linux's ephemeral range
// (32768-60999), where outgoing connections would take ports at random.
inline constexpr int kSlurmRendezvousPortBase = 20000;
inline constexpr int kSlurmRendezvousPortSpan = 12000;
inline constexpr int kSlurmRendezvousPortCandidates = 4;
int SlurmRendezvousPort(absl::string_view job_id);

// nullopt when SLURM_JOB_ID is not set. Otherwise the flags Slurm implies: --nnodes from
// SLURM_NNODES (or SLURM_JOB_NUM_NODES), --node_rank from SLURM_NODEID, --nproc_per_node from
// SLURM_GPUS_ON_NODE when that is a positive count, and, when the job has more than one node, a
// c10d rendezvous on the first host of SLURM_JOB_NODELIST (or SLURM_NODELIST) at the job's own port
// (SlurmRendezvousPort) with --rdzv_id slurm-<job id> (a one-node job keeps the single-node path).
// A variable that is present but malformed is an error naming it.
absl::StatusOr<std::optional<SlurmDefaults>> DetectSlurm(
    const std::map<std::string, std::string>& env);

}  // namespace mxrun
