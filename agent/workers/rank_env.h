#pragma once
// A rank's environment, built from the spec, the round and the rank's own files: what a worker
// starts with, what a standby starts with (no place in the job yet), and the round notice that
// tells a kept worker or a promoted standby its place (only what differs from the agent's own
// environment). Pure.

#include <string>

#include "agent/workers/worker_spec.h"
#include "common/control_protocol.h"
#include "common/env_contract.h"
#include "rendezvous/wire/wire.h"

namespace mxrun {

// The per-rank files a worker is told about (the worker group makes them).
struct RankFiles {
  std::string dir;  // its folder in the attempt's
  std::string error_file;
  std::string heartbeat_file;     // empty: none
  std::string nccl_trace_prefix;  // empty: PyTorch's default
  std::string flight_socket;      // MXRUN_FLIGHT_SOCKET (empty: none)
};

EnvMap RankEnv(const WorkerSpec& spec, int local_rank, const RankFiles& files,
               const RoundAssignment& round, double failure_time);
EnvMap StandbyEnv(const WorkerSpec& spec, int local_world_size);
RoundNotice RankNotice(const WorkerSpec& spec, int local_rank, const RankFiles& files,
                       const RoundAssignment& round, double failure_time);

}  // namespace mxrun
