#pragma once
// The torchrun environment contract: what every worker process finds in its environment.
// Pure functions: the agent passes in its own environment and the group's shape, and gets the
// exact `KEY=VALUE` list to hand to execve. See docs/CONTRACT.md for the variables and their
// meaning.

#include <map>
#include <string>
#include <vector>

namespace mxrun {

// An environment as an ordered map, so that results are deterministic and easy to compare.
using EnvMap = std::map<std::string, std::string>;

// Parses `environ`-style "KEY=VALUE" strings (entries without '=' are dropped).
EnvMap EnvFromStrings(const char* const* envp);
std::vector<std::string> EnvToStrings(const EnvMap& env);

// The shape of one worker group on one node, for one attempt.
struct GroupContract {
  std::string role = "default";
  int node_rank = 0;             // GROUP_RANK
  int num_nodes = 1;             // GROUP_WORLD_SIZE
  int local_world_size = 1;      // LOCAL_WORLD_SIZE: workers on this node
  int global_rank_base = 0;      // global rank of this node's local rank 0
  int world_size = 1;            // WORLD_SIZE: workers in the whole job
  int role_rank_base = 0;        // ROLE_RANK of local rank 0 (one role: same as global_rank_base)
  int role_world_size = 1;       // ROLE_WORLD_SIZE
  std::string master_addr;       // MASTER_ADDR: where global rank 0 hosts the TCPStore
  int master_port = 0;           // MASTER_PORT
  int restart_count = 0;         // TORCHELASTIC_RESTART_COUNT
  int max_restarts = 0;          // TORCHELASTIC_MAX_RESTARTS
  std::string run_id;            // TORCHELASTIC_RUN_ID
  bool use_agent_store = false;  // TORCHELASTIC_USE_AGENT_STORE ("True"/"False")
};

// Where a worker that dies of an uncaught exception leaves its flight-recorder dump: beside its
// MXRUN_FLIGHT_SOCKET, with this suffix (python/mxrun/_flight_recorder.py).
inline constexpr const char* kFlightExitSuffix = ".exit.json";

// Extra per-worker values that are not part of the group's shape.
struct WorkerExtras {
  std::string error_file;         // TORCHELASTIC_ERROR_FILE (empty: not set)
  std::string host_name;          // MXRUN_HOST
  std::string log_dir;            // MXRUN_LOG_DIR: this worker's log folder (empty: none)
  std::string heartbeat_file;     // MXRUN_HEARTBEAT_FILE: touched by the worker as it progresses
                                  // (empty: hang detection by heartbeat is off)
  std::string timer_file;         // TORCHELASTIC_TIMER_FILE: the FileTimer pipe (empty: none)
  std::string nccl_trace_prefix;  // TORCH_NCCL_DEBUG_INFO_TEMP_FILE unless the agent's own
                                  // environment sets it (empty: left to PyTorch)
  std::string flight_socket;      // MXRUN_FLIGHT_SOCKET: where the mxrun module serves PyTorch's
                                  // flight recorder to the agent (empty: not set)
  bool control_channel = false;   // MXRUN_CONTROL_FD=3 (common/control_protocol.h)
  int round = -1;                 // MXRUN_ROUND: the rendezvous round it starts in (-1: not set)
  std::string virtual_device;     // --virtual-local-rank: LOCAL_RANK=0 and CUDA_VISIBLE_DEVICES
                                  // naming only this device (empty: off)
  double failure_time = 0;        // MXRUN_FAILURE_TIME: when the failure that started this round
                                  // was seen, seconds since the Unix epoch (0: not set)
};

// The full environment of local rank `local_rank`: the agent's environment plus the contract.
// The agent's own values win for OMP_NUM_THREADS, the NCCL error-handling switches (torchrun keeps
// a user's choice there) and the NCCL flight recorder's file; every other contract variable is
// overwritten.
EnvMap BuildWorkerEnv(const EnvMap& agent_env, const GroupContract& group, int local_rank,
                      const WorkerExtras& extras);

// True when the launcher must set OMP_NUM_THREADS=1 for its workers (unset and more than one
// worker per node), in which case it prints torchrun's one-line notice once.
bool ShouldDefaultOmpThreads(const EnvMap& agent_env, int local_world_size);

}  // namespace mxrun
