#pragma once
// The agent's view of rendezvous. The agent asks (join a round, report how its workers ended) and
// the rendezvous answers with events, delivered through a file descriptor the agent watches in its
// event loop, so that nothing blocks: a signal, a worker exit and a message from the master are all
// handled as they come. The single-node implementation is local_rendezvous.h; the multi-node gRPC
// client is grpc_rendezvous.h. Both keep the restart budget where every node can agree on it.
//
// Threading: calls come from the agent's thread only; an implementation may produce events on
// other threads (it must then make EventFd() readable).

#include <chrono>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/restart_phases.h"
#include "common/straggler_watch.h"
#include "common/worker_failure.h"
#include "rendezvous/wire/wire.h"

namespace mxrun {

struct RendezvousEvent {
  enum class Kind {
    kRegistered,     // the rendezvous accepted this node's join; `reason` says what it waits for
    kRoundReady,     // `round` is this node's assignment: start the workers
    kRejoin,         // stop the workers and Join() again (`restart`: a failure spent the budget)
    kPeerFinished,   // another node's workers all exited 0 (`reason` names it): the exit barrier
                     // (--exit_barrier_timeout) starts for the workers still running here
    kJobSucceeded,   // every node's workers succeeded: exit 0
    kJobFailed,      // the budget is spent: exit 1 with `first_failure` in the summary
    kError,          // rendezvous failed (`error`): exit 3
    kStraggler,      // the master named one of this node's ranks a straggler, or no longer
                     // (`straggler`, about round `round.round`)
    kFlightRequest,  // another node (`reason`: its host) judged a hang in round `round.round`:
                     // take the live ranks' flight recorders and OfferFlightRecords() them,
                     // before stopping anything
  };
  Kind kind = Kind::kError;
  RoundAssignment round;
  std::string reason;           // kRejoin: why, in words; kPeerFinished: who finished
  bool restart = false;         // kRejoin: caused by a worker failure (the budget was spent)
  bool master_silent = false;   // kRejoin: the master was not heard for the lease; every worker
                                // stops (none is kept for an in-process restart: no round is sure)
  int restarts_spent = 0;       // kRejoin, kJobFailed
  int max_restarts = 0;         // kRejoin, kJobFailed
  WorkerFailure first_failure;  // kJobFailed: the first failure of the job's last attempt
  // kJobFailed: every attempt failed the same deterministic way (common/repeated_failure.h),
  // `failure_signature` says how; a requeue would fail the same way.
  bool same_failure_every_attempt = false;
  std::string failure_signature;
  // kRegistered: the master leaves this node out of the run's rounds for now (`reason` says why
  // and for how long); it is admitted again when its back-off ends.
  bool excluded = false;
  // kJobSucceeded, kJobFailed: the nodes left out during the job, and why (one line each).
  std::vector<std::string> excluded_nodes;
  absl::Status error;       // kError
  StragglerNews straggler;  // kStraggler
};

class Rendezvous {
 public:
  virtual ~Rendezvous() = default;

  // Asks for a place in the next round; answered by kRoundReady (or kError on timeout, an
  // unreachable master, a closed run).
  virtual void Join() = 0;
  // This node's group failed with `failure` first; answered by kRejoin or kJobFailed.
  virtual void ReportFailure(const WorkerFailure& failure) = 0;
  // Every worker on this node succeeded; answered by kJobSucceeded, or kRejoin if a peer failed.
  virtual void ReportSucceeded() = 0;
  // The latest progress of this node's ranks in the running round. The rendezvous judges
  // stragglers (the local one this node's ranks, a master the whole job's, passed on with the next
  // heartbeat) and tells the agent with kStraggler.
  virtual void ReportProgress(const std::vector<RankProgress>& /*ranks*/) {}
  // One of this node's restarts, timed phase by phase: a master keeps them for `mxrun status`.
  // Best effort.
  virtual void ReportRestartPhases(const RestartPhases& /*phases*/) {}
  // This node found itself unhealthy (`why`): it does not join; the rendezvous tells the master,
  // whose status lists it. Best effort; the agent exits next.
  virtual void ReportUnhealthy(const std::string& /*why*/) {}
  // This node's answer to kFlightRequest: its live ranks' flight-recorder dumps. Best effort.
  virtual void OfferFlightRecords(const FlightRecordSet& /*own*/) {}
  // This node judged a hang: sends its own ranks' dumps and waits until the other nodes' sets
  // account for every rank in `expected` (or `budget` passes); returns what came. Blocks the
  // caller only (the rendezvous's own threads carry on, so heartbeats still go), calling
  // `meanwhile` every 50 ms or so. One node: none.
  virtual std::vector<FlightRecordSet> GatherFlightRecords(
      const FlightRecordSet& /*own*/, const std::set<int>& /*expected*/,
      std::chrono::milliseconds /*budget*/, const std::function<void()>& /*meanwhile*/) {
    return {};
  }
  // The agent is leaving for good (it was told to stop by a signal). Best effort, non-blocking.
  virtual void Leave() = 0;

  // Readable whenever TakeEvents() has something to return.
  virtual int EventFd() const = 0;
  virtual std::vector<RendezvousEvent> TakeEvents() = 0;
};

}  // namespace mxrun
