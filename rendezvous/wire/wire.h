#pragma once
// What the rendezvous master and the agents' client say to each other, as C++ values (the wire
// format is proto/mxrun.proto; rendezvous/grpc/proto_convert maps one onto the other): a node's and
// a job's description, a rank's progress report, and a message to an agent. Shared by both sides,
// so that the client needs nothing of the master's state machine (master_state.h).

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/straggler_watch.h"
#include "common/worker_failure.h"

namespace mxrun {

// One closed round, as seen by one node.
struct RoundAssignment {
  std::string run_id;
  int round = 0;  // increases with every re-formation of the group
  int node_rank = 0;
  int num_nodes = 1;
  int local_world_size = 1;  // this node's workers
  int global_rank_base = 0;  // global rank of this node's local rank 0
  int world_size = 1;
  std::string master_addr;  // the workers' TCPStore (MASTER_ADDR): node rank 0's
  int master_port = 0;
  int restart_count = 0;  // failures spent so far (TORCHELASTIC_RESTART_COUNT)
  int max_restarts = 0;
  bool use_agent_store = false;  // node rank 0's agent hosts that store; false: global rank 0
};

// A rank's last progress report on this node (its worker's control channel).
struct RankProgress {
  int global_rank = 0;
  int local_rank = 0;
  long long step = 0;
  double step_seconds = -1;  // negative: unknown
  double busy_seconds = -1;  // the rank's own work per step (control_protocol.h); negative: unknown
  std::chrono::steady_clock::time_point at;  // when the agent received it
};

using NodeId = uint64_t;  // one per agent session at a master

// One rank's progress as an agent's heartbeat carries it.
struct RankReport {
  int global_rank = 0;
  int local_rank = 0;
  long long step = 0;
  double step_seconds = -1;  // negative: unknown
  double age_s = 0;          // how old the report was when the heartbeat left the agent
  double busy_seconds = -1;  // the rank's own work per step; negative: unknown
};

// Repeat offenders kept out (node_exclusion.h): the job's rule.
struct ExclusionRule {
  int after_failures = 2;                       // --exclude_after (0: never exclude)
  std::chrono::milliseconds window{3'600'000};  // --exclude_window
  std::chrono::milliseconds backoff{300'000};   // --exclude_backoff: the first one; doubles
};

// Every rendezvous time-out in one place (set by the job's first node, from --rdzv_conf).
struct RendezvousTimeouts {
  std::chrono::milliseconds join_timeout{600'000};
  std::chrono::milliseconds last_call_timeout{30'000};
  std::chrono::milliseconds heartbeat_interval{1'000};
  int missed_heartbeats = 5;
  std::chrono::milliseconds finished_run_ttl{600'000};

  std::chrono::milliseconds lease() const { return heartbeat_interval * missed_heartbeats; }
};

struct NodeDesc {
  std::string host;
  std::string address;  // advertised: MASTER_ADDR if this node gets rank 0
  int local_world_size = 1;
  int requested_rank = -1;  // -1: none
  bool hosts_master = false;
  int master_port = 0;    // free port on `address` for the workers' TCPStore
  std::string agent_id;   // stable for the agent process (recognised after a master restart)
  std::string unhealthy;  // the node found itself unhealthy: why (it does not join)
  // Where the node sits in the network, widest group first ("spine0/leaf3/nvl:<id>"; empty:
  // unknown or --rank_order=host): its rank follows it (rendezvous/master_state/rank_order.h).
  std::string topology;
  // It hosts the workers' store on `address`:`master_port` when it gets node rank 0
  // (--workers_store=agent; agent/store/workers_store_rendezvous.h).
  bool hosts_workers_store = false;
};

struct JobDesc {
  int min_nodes = 1;
  int max_nodes = 1;
  int max_restarts = 0;
  RendezvousTimeouts timeouts;
  StragglerRule stragglers;  // judged over every rank by the master (steps 0: not judged)
  ExclusionRule exclusion;   // repeat offenders left out (node_exclusion.h; after 0: never)
};

// A node's flight-recorder dumps of one round (proto FlightRecords).
struct RankFlightRecord {
  int global_rank = 0;
  std::string json;  // empty: none, `error` says why
  std::string error;
};
struct FlightRecordSet {
  int round = 0;
  std::string host;
  int node_rank = 0;
  std::vector<RankFlightRecord> ranks;
  size_t bytes() const {
    size_t n = 0;
    for (const RankFlightRecord& r : ranks) n += r.json.size() + r.error.size();
    return n;
  }
};

// One message for one agent.
struct ToAgent {
  enum class Kind {
    kWaiting,
    kRound,
    kStop,
    kPeerFinished,
    kFinished,
    kRefused,
    kStraggler,
    kFlightRequest,  // take the live ranks' flight recorders of round `flight.round`, send them
    kFlightRecords,  // another node's recorders (`flight`), for the node that asked
  };
  NodeId node = 0;
  Kind kind = Kind::kWaiting;
  int nodes_waiting = 0;                       // kWaiting
  std::string excluded;                        // kWaiting: why this node is left out of rounds
  RoundAssignment round;                       // kRound
  std::string reason;                          // kStop
  bool restart = false;                        // kStop: a failure spent the budget
  int restarts_spent = 0;                      // kStop, kFinished
  int max_restarts = 0;                        // kStop, kFinished
  bool success = false;                        // kFinished
  std::optional<WorkerFailure> first_failure;  // kFinished (failed)
  std::vector<std::string> excluded_nodes;     // kFinished: every exclusion of the job, why
  bool same_failure = false;                   // kFinished (failed): every attempt failed alike
  std::string failure_signature;               // kFinished (failed), with same_failure
  absl::Status refusal;                        // kRefused
  std::string peer_host;       // kPeerFinished: the member whose workers all exited 0
  int peer_node_rank = 0;      // kPeerFinished
  int nodes_finished = 0;      // kPeerFinished: members finished so far
  int num_nodes = 0;           // kPeerFinished: members of the round
  StragglerNews straggler;     // kStraggler: about one of the node's ranks
  int straggler_round = 0;     // kStraggler
  FlightRecordSet flight;      // kFlightRecords; kFlightRequest: round and
                               // requester (host) only
  std::string log_line;        // what the master logs with it (run and host); "": nothing
  bool close_session = false;  // the master ends this session after the message
};

}  // namespace mxrun
