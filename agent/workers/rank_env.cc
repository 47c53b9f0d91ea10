#include "agent/workers/rank_env.h"

#include "common/env_contract.h"
#include "common/visible_devices.h"

namespace mxrun {

EnvMap RankEnv(const WorkerSpec& spec, int local_rank, const RankFiles& files,
               const RoundAssignment& round, double failure_time) {
  GroupContract contract;
  contract.role = spec.role;
  contract.node_rank = round.node_rank;
  contract.num_nodes = round.num_nodes;
  contract.local_world_size = round.local_world_size;
  contract.global_rank_base = round.global_rank_base;
  contract.world_size = round.world_size;
  contract.role_rank_base = round.global_rank_base;
  contract.role_world_size = round.world_size;
  contract.master_addr = round.master_addr;
  contract.master_port = round.master_port;
  contract.restart_count = round.restart_count;
  contract.max_restarts = round.max_restarts;
  contract.run_id = round.run_id;
  contract.use_agent_store = round.use_agent_store;
  WorkerExtras extras;
  extras.error_file = files.error_file;
  extras.host_name = spec.host_name;
  if (spec.logs.NeedsFiles()) extras.log_dir = files.dir;
  extras.heartbeat_file = files.heartbeat_file;
  extras.timer_file = spec.timer_file;
  extras.nccl_trace_prefix = files.nccl_trace_prefix;
  extras.flight_socket = files.flight_socket;
  extras.control_channel = true;
  extras.round = round.round;
  extras.failure_time = failure_time;
  if (spec.virtual_local_rank) {
    // The launcher checked that CUDA_VISIBLE_DEVICES, when set, lists a device for every rank.
    extras.virtual_device = DeviceOfLocalRank(spec.base_env, local_rank).value_or("");
  }
  return BuildWorkerEnv(spec.base_env, contract, local_rank, extras);
}

EnvMap StandbyEnv(const WorkerSpec& spec, int local_world_size) {
  // No place in the job yet: the contract comes with the round notice that promotes it. It
  // knows how many workers share this node (threads) and that it is a standby.
  EnvMap env = spec.base_env;
  for (const char* key :
       {"RANK", "LOCAL_RANK", "WORLD_SIZE", "GROUP_RANK", "GROUP_WORLD_SIZE", "ROLE_RANK",
        "ROLE_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_ERROR_FILE",
        "MXRUN_HEARTBEAT_FILE", "MXRUN_LOG_DIR", "MXRUN_FAILURE_TIME", "NOTIFY_SOCKET",
        "WATCHDOG_USEC", "WATCHDOG_PID", "MXRUN_RDZV_TOKEN", "MXRUN_FLIGHT_SOCKET"}) {
    env.erase(key);
  }
  env["LOCAL_WORLD_SIZE"] = std::to_string(local_world_size);
  if (ShouldDefaultOmpThreads(spec.base_env, local_world_size)) env["OMP_NUM_THREADS"] = "1";
  env["MXRUN_HOST"] = spec.host_name;
  env["MXRUN_CONTROL_FD"] = std::to_string(kControlFd);
  env["MXRUN_STANDBY"] = "1";
  return env;
}

RoundNotice RankNotice(const WorkerSpec& spec, int local_rank, const RankFiles& files,
                       const RoundAssignment& round, double failure_time) {
  RoundNotice notice;
  notice.round = round.round;
  notice.failure_time = failure_time;
  for (auto& [key, value] : RankEnv(spec, local_rank, files, round, failure_time)) {
    auto base = spec.base_env.find(key);
    if (base == spec.base_env.end() || base->second != value) notice.env[key] = value;
  }
  return notice;
}

}  // namespace mxrun
