#pragma once
// The torchrun environment contract seen from the worker's side: what a training process reads
// to learn its place in the job. Pure: the caller passes the environment in.

#include <string>

#include "common/env_contract.h"

namespace mxrun {

struct WorkerIdentity {
  int rank = 0;                  // RANK
  int world_size = 1;            // WORLD_SIZE
  int local_rank = 0;            // LOCAL_RANK
  int local_world_size = 1;      // LOCAL_WORLD_SIZE
  std::string master_addr;       // MASTER_ADDR (empty when running alone)
  int master_port = 0;           // MASTER_PORT (0 when running alone)
  int restart_count = 0;         // TORCHELASTIC_RESTART_COUNT
  bool use_agent_store = false;  // TORCHELASTIC_USE_AGENT_STORE == "True"
  std::string error_file;        // TORCHELASTIC_ERROR_FILE (empty: none)
  std::string run_id;            // TORCHELASTIC_RUN_ID
  std::string heartbeat_file;    // MXRUN_HEARTBEAT_FILE: touched on progress (empty: none)

  bool Alone() const { return world_size == 1 && master_port == 0; }
};

// Reads the contract. With none of RANK, WORLD_SIZE and MASTER_PORT set the process runs alone
// (rank 0 of 1). A partial or inconsistent contract throws std::invalid_argument naming the
// variable and the value it had, so a mistyped launch script fails at once instead of hanging in
// a rendezvous. (No Abseil here: the trainer links this and builds where Abseil is absent.)
WorkerIdentity ReadWorkerIdentity(const EnvMap& env);

}  // namespace mxrun
