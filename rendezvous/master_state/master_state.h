#pragma once
// The rendezvous master's decisions, as a pure single-owner state machine: events in (join,
// heartbeat, failure and success reports, a node gone, a tick of the master's clock), messages to
// agents out. No I/O, no threads, no clock of its own: the gRPC service feeds it and delivers what
// it returns; tests drive it with a fake time.
//
// A run (one job, keyed by run id) moves through these phases:
//
//   waiting --(round closes)--> running --(every member succeeded)--> succeeded
//      ^                           |
//      +---(stop and re-join)------+--(failure with the budget spent)--> failed
//
// * waiting: nodes join. At max_nodes the round closes at once. At min_nodes a last-call window
//   opens (last_call_timeout) and the round closes when it ends. When the group is re-forming
//   (after a stop) the round closes as soon as every stopped member has re-joined and at least
//   min_nodes are there. Below min_nodes for join_timeout: every waiting node is refused
//   (DeadlineExceeded).
// * running: the members run workers. Then
//     - a member reports a worker failure: while restarts remain, one is spent and every member is
//       told to stop and re-join; otherwise every node is told the job failed;
//     - a member is gone (stream closed, Leave, or no heartbeat for heartbeat_interval x
//       missed_heartbeats on the master's clock): every other member stops and re-joins, budget
//       kept;
//     - a new node joins while the group has fewer than max_nodes members and none has finished:
//       every member stops and re-joins to admit it, budget kept;
//     - a member reports success: the members still running are told (kPeerFinished, so their
//       agents' exit barriers start); once every member has, every node is told the job succeeded.
// * succeeded / failed: late joiners are refused (FailedPrecondition); the run is forgotten after
//   finished_run_ttl.
//
// Node ranks in a closed round: an explicitly requested rank wins, then the network's order
// (rank_order.h: each node's topology path, the master's group first; without paths, the node
// hosting the master gets rank 0, then natural order of host names, node7 before node66), then
// join order. Global ranks follow node ranks; nodes may have different numbers of workers.

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "common/repeated_failure.h"
#include "common/straggler_watch.h"
#include "common/worker_failure.h"
#include "rendezvous/master_state/flight_gathering.h"
#include "rendezvous/master_state/node_exclusion.h"
#include "rendezvous/master_state/rank_order.h"
#include "rendezvous/master_state/restart_timings.h"
#include "rendezvous/master_state/run_progress.h"
#include "rendezvous/rendezvous.h"
#include "rendezvous/wire/wire.h"

namespace mxrun {

// NodeId (wire.h): one per agent session, given by the service. The node and job descriptions
// and the messages to an agent are in wire.h, which the agents' client shares.

// What a master with a state folder keeps across its own restart: the runs whose groups are
// running, with their members (identified by agent id, since sessions do not survive).
struct PersistedMember {
  NodeDesc desc;
  int node_rank = 0;
  bool succeeded = false;
};
struct PersistedRun {
  std::string run_id;
  JobDesc job;
  int round = 0;
  int restarts_spent = 0;
  int world_size = 0;
  std::vector<PersistedMember> members;  // by node rank
};

// One line of a run's recent history (the status page's timeline).
struct RunEvent {
  std::chrono::steady_clock::time_point at;
  std::string kind;  // round, failure, reforming, recovered, succeeded, failed, timeout,
                     // straggler
  std::string text;
};

// What `mxrun status` shows.
struct MemberSnapshot {
  NodeId node = 0;
  NodeDesc desc;
  int node_rank = -1;
  std::string state;
  std::chrono::milliseconds since_last_seen{0};
  std::vector<RankSnapshot> ranks;  // a running member's ranks that reported progress
  std::string note;                 // an excluded node: why, and for how long
};
struct RunSnapshot {
  std::string run_id;
  std::string phase;
  int round = 0;
  int restarts_spent = 0;
  JobDesc job;
  int world_size = 0;
  std::vector<MemberSnapshot> members;
  // Failures of the run so far, by cause: exit, signal, hang (worker failures reported by the
  // agents), node_lost (a member's session ended or its lease expired while the group ran),
  // rendezvous_timeout (the join timeout ended a round that never formed).
  std::map<std::string, long long> failures;
  std::vector<RunEvent> history;  // oldest first, at most kHistory
  // Seconds from the last failure (a worker's, or a node lost) to the re-formed group's first
  // reported step; negative before any recovery.
  double last_recovery_s = -1;
  std::vector<std::string> unhealthy;  // "host: why" of the nodes that found themselves unhealthy
  // The last restarts, phase by phase: per phase the slowest node's seconds (restart_timings.h).
  std::vector<RestartPhases> restarts;
};

class MasterState {
 public:
  using Time = std::chrono::steady_clock::time_point;
  using Out = std::vector<ToAgent>;

  // First message of a session, or a re-join after a stop (same node id).
  Out Join(Time now, NodeId node, const std::string& run_id, const NodeDesc& desc,
           const JobDesc& job);
  // An agent whose workers still run round `round` reconnects after the master restarted: it is
  // re-attached to that round (acknowledged with kWaiting, nothing stops) when the restored state
  // has it as a member; when the restored group is re-forming it hears the stop it missed (and
  // keeps its place among the members being waited for); otherwise it is told to stop its
  // workers and join afresh.
  Out Resume(Time now, NodeId node, const std::string& run_id, const NodeDesc& desc, int round);

  // The running runs, for a state file; and the restore after a restart. Restored members wait
  // for their agents to reconnect under fresh sessions; one that has not within the lease
  // counts as gone (the others stop and re-form, as for any lost node).
  std::vector<PersistedRun> Persisted() const;
  void Restore(Time now, const std::vector<PersistedRun>& runs);
  // True once after any call that changed what Persisted() returns (heartbeats and ticks that
  // only move the clock do not), so that the state file is written only when there is news.
  bool TakeChanged() { return std::exchange(changed_, false); }
  // Restored members of agent `agent_id` are gone (its lease expired: the agent that hosted the
  // previous master, which died with it): the group re-forms at once instead of waiting a lease
  // for them. `why` appears in the other nodes' logs.
  Out AgentGone(Time now, const std::string& agent_id, const std::string& why);
  // With the progress of the node's ranks in `round` (run_progress.h), which names stragglers:
  // each is told to its node's agent (kStraggler) and kept in the run's history.
  Out Heartbeat(Time now, NodeId node, int round = -1, const std::vector<RankReport>& ranks = {});
  Out ReportFailure(Time now, NodeId node, int round, const WorkerFailure& failure);
  Out ReportSucceeded(Time now, NodeId node, int round);
  // One of the node's restarts, timed phase by phase; kept for the status. A report that does
  // not hold (out of range, a round not formed) is left out and noted in the run's history.
  Out ReportRestartPhases(Time now, NodeId node, const RestartPhases& phases);
  // A member's flight-recorder dumps of the running round (flight_gathering.h): with `request`
  // (it judged a hang) it gets every other member's, who are asked for theirs; without, they go
  // to the members that asked.
  Out OfferFlightRecords(Time now, NodeId node, const FlightRecordSet& set, bool request);
  // The session ended (stream closed or Leave). `why` appears in the other nodes' logs.
  Out NodeGone(Time now, NodeId node, const std::string& why);
  // Lease expiry, last-call and join time-outs, forgetting finished runs.
  Out Tick(Time now);

  std::vector<RunSnapshot> Snapshot(Time now, const std::string& run_id) const;  // "" = all
  size_t run_count() const { return runs_.size(); }
  bool HasNode(NodeId node) const { return node_runs_.count(node) > 0; }

 private:
  // kExcluded: waiting, but left out of rounds until its back-off ends (node_exclusion.h).
  enum class NodeState { kWaiting, kRunning, kSucceeded, kStopping, kExcluded };
  enum class Phase { kWaiting, kRunning, kSucceeded, kFailed };
  struct Node {
    NodeDesc desc;
    NodeState state = NodeState::kWaiting;  // changed only through SetState (counts below)
    uint64_t join_order = 0;
    Time last_seen;
    int node_rank = -1;
    bool member = false;  // of the current round
  };
  struct Run {
    std::string id;
    JobDesc job;
    Phase phase = Phase::kWaiting;
    int round = -1;  // index of the last closed round
    int restarts_spent = 0;
    int world_size = 0;
    std::map<NodeId, Node> nodes;
    std::vector<NodeId> members;  // of the current round, by node rank
    Time waiting_since;
    std::optional<Time> last_call_deadline;
    Time finished_at;
    std::string stop_reason;                      // of the last stop (told again to late resumers)
    std::map<std::string, long long> failures;    // by cause (RunSnapshot::failures)
    std::deque<RunEvent> history;                 // the last kHistory events
    RunProgress progress;                         // of the current round
    RepeatedFailures repeated;                    // every attempt's failure: the same each time?
    NodeExclusion exclusion;                      // repeat offenders left out
    std::vector<std::string> unhealthy;           // "host: why", the last kHistory
    RestartTimings restart_timings;               // the nodes' restarts, phase by phase
    FlightGathering flight;                       // the round's flight recorders, for a hang
    std::optional<Time> failed_at;                // a failure the group has not recovered from
    std::optional<Time::duration> last_recovery;  // the last failure to the first step after it
    bool stop_restart = false;
    // Kept as nodes change, so that no event walks every node (a round of N joins would be
    // O(N^2)): how many nodes are in each state, and who asked for which node rank.
    int waiting = 0;
    int stopping = 0;
    int succeeded = 0;
    std::map<int, NodeId> requested_ranks;
    // No node's lease can end before this (the earliest last_seen + lease at the last look, lowered
    // when a node is seen earlier than that): Tick walks the nodes only once it has passed, every
    // few seconds instead of every 50 ms tick (at 16,384 nodes the walks held the lock for ms).
    Time lease_check_at = Time::min();
  };

  static constexpr size_t kHistory = 50;
  static ToAgent Message(NodeId node, ToAgent::Kind kind);
  static ToAgent Refusal(NodeId node, absl::Status status);  // closes the session
  static void Record(Run& run, Time now, std::string kind, std::string text);
  Run* FindRunOf(NodeId node);
  static void SetState(Run& run, Node& node, NodeState state);
  static void Seen(Run& run, Node& node, Time now);  // its lease starts again now
  static void Count(Run& run, NodeState state, int delta);
  static void ForgetNodes(Run& run);                  // every node of a finished run
  static bool IsMember(const Run& run, NodeId node);  // of the current round
  void MaybeCloseRound(Time now, Run& run, Out& out);
  void CloseRound(Run& run, std::vector<NodeId> waiting, Out& out);
  static void TrackProgress(Run& run);  // the members' rank ranges, at a new or restored round
  // A member's worker failed and a restart follows: a repeat offender is left out of the next
  // rounds when the others can go on without it (node_exclusion.h).
  void MaybeExclude(Time now, Run& run, NodeId node, Out& out);
  // Excluded nodes whose back-off has ended wait again; a running group re-forms to admit them.
  void Readmit(Time now, Run& run, Out& out);
  void StopMembers(Time now, Run& run, const std::string& reason, bool restart, Out& out);
  void Finish(Time now, Run& run, bool success, const std::optional<WorkerFailure>& failure,
              Out& out);
  void RemoveNode(Run& run, NodeId node);
  // A detached member's entry moves to the session `to` of its reconnected agent.
  void MoveNode(Time now, Run& run, NodeId from, NodeId to);
  static std::string PhaseName(Phase phase);
  static std::string NodeStateName(NodeState state);

  std::map<std::string, Run> runs_;
  std::map<NodeId, std::string> node_runs_;
  uint64_t next_join_order_ = 0;
  bool changed_ = false;  // Persisted() differs from when TakeChanged() was last called
  // Restored members are keyed by ids from the top of the range until their agents reconnect.
  NodeId next_detached_id_ = ~NodeId{0};
};

}  // namespace mxrun
