#pragma once
// The agent's view of rendezvous: join a round, learn this node's place in the group, report how the
// group ended. The agent is written against this interface only; the single-node implementation lives
// in local_rendezvous.h, and the multi-node gRPC client plugs in beside it.
//
// Threading: an implementation is used from the agent's thread only.

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "common/worker_failure.h"

namespace mxrun {

// One closed round, as seen by one node.
struct RoundAssignment {
  std::string run_id;
  int round = 0;             // increases with every re-formation of the group
  int node_rank = 0;
  int num_nodes = 1;
  int local_world_size = 1;  // this node's workers
  int global_rank_base = 0;  // global rank of this node's local rank 0
  int world_size = 1;
  std::string master_addr;   // TCPStore of global rank 0 (MASTER_ADDR)
  int master_port = 0;
  int restart_count = 0;     // failures spent so far (TORCHELASTIC_RESTART_COUNT)
  int max_restarts = 0;
  bool use_agent_store = false;
};

// What happens after a group failure; decided by whoever holds the restart budget.
struct FailureDecision {
  bool restart = false;           // re-join and start again; otherwise the job has failed
  WorkerFailure first_failure;    // the first failure of the attempt that decided the outcome
};

// Something the rendezvous asks of a running agent (multi-node: pushed by the master).
enum class RendezvousCommand {
  kStopAndRejoin,   // membership changed or a peer failed: stop workers, call NextRound again
  kJobFailed,       // the job is over: stop workers and exit 1
};

class Rendezvous {
 public:
  virtual ~Rendezvous() = default;

  // Joins the next round and waits for it to close.
  // Errors: DeadlineExceeded (join timeout), Unavailable (master unreachable),
  // FailedPrecondition (the run is closed or finished).
  virtual absl::StatusOr<RoundAssignment> NextRound() = 0;

  // This node's group failed with `failure` as its first failure. Spends the restart budget.
  virtual absl::StatusOr<FailureDecision> ReportGroupFailure(const WorkerFailure& failure) = 0;

  // Every worker on this node succeeded. Returns when the whole job is done.
  virtual absl::Status ReportSuccess() = 0;

  // A file descriptor that becomes readable when TakeCommand() has something; -1 when commands never
  // arrive (single node).
  virtual int CommandFd() const { return -1; }
  virtual std::optional<RendezvousCommand> TakeCommand() { return std::nullopt; }
};

}  // namespace mxrun
