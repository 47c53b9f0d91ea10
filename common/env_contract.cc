#include "common/env_contract.h"

#include <cstdio>
#include <cstring>

namespace mxrun {

EnvMap EnvFromStrings(const char* const* envp) {
  EnvMap env;
  for (; envp != nullptr && *envp != nullptr; ++envp) {
    const char* eq = std::strchr(*envp, '=');
    if (eq == nullptr) continue;
    env.emplace(std::string(*envp, eq), std::string(eq + 1));
  }
  return env;
}

std::vector<std::string> EnvToStrings(const EnvMap& env) {
  std::vector<std::string> out;
  out.reserve(env.size());
  for (const auto& [key, value] : env) out.push_back(key + "=" + value);
  return out;
}

bool ShouldDefaultOmpThreads(const EnvMap& agent_env, int local_world_size) {
  return local_world_size > 1 && agent_env.find("OMP_NUM_THREADS") == agent_env.end();
}

EnvMap BuildWorkerEnv(const EnvMap& agent_env, const GroupContract& group, int local_rank,
                      const WorkerExtras& extras) {
  EnvMap env = agent_env;
  auto set = [&env](const char* key, std::string value) { env[key] = std::move(value); };
  auto set_default = [&env](const char* key, const char* value) { env.emplace(key, value); };

  set("LOCAL_RANK", std::to_string(local_rank));
  set("RANK", std::to_string(group.global_rank_base + local_rank));
  set("GROUP_RANK", std::to_string(group.node_rank));
  set("ROLE_RANK", std::to_string(group.role_rank_base + local_rank));
  set("ROLE_NAME", group.role);
  set("LOCAL_WORLD_SIZE", std::to_string(group.local_world_size));
  set("WORLD_SIZE", std::to_string(group.world_size));
  set("GROUP_WORLD_SIZE", std::to_string(group.num_nodes));
  set("ROLE_WORLD_SIZE", std::to_string(group.role_world_size));
  set("MASTER_ADDR", group.master_addr);
  set("MASTER_PORT", std::to_string(group.master_port));
  set("TORCHELASTIC_RESTART_COUNT", std::to_string(group.restart_count));
  set("TORCHELASTIC_MAX_RESTARTS", std::to_string(group.max_restarts));
  set("TORCHELASTIC_RUN_ID", group.run_id);
  set("TORCHELASTIC_USE_AGENT_STORE", group.use_agent_store ? "True" : "False");
  // As torchrun 2.x: the 2.x name only (a user's explicit choice is kept, either name). The 1.x
  // name is not set: PyTorch 2.x warns about it twice on every NCCL rank (seen on an H200, 2.11).
  set_default("TORCH_NCCL_ASYNC_ERROR_HANDLING", "1");
  if (ShouldDefaultOmpThreads(agent_env, group.local_world_size)) set("OMP_NUM_THREADS", "1");

  if (extras.error_file.empty()) {
    env.erase("TORCHELASTIC_ERROR_FILE");  // the agent's own file is not the worker's
  } else {
    set("TORCHELASTIC_ERROR_FILE", extras.error_file);
  }
  // The service manager talks to mxrun, not to its workers.
  for (const char* key : {"NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID"}) env.erase(key);
  // The rendezvous token is the agent's secret: a worker (any code it imports) never sees it.
  env.erase("MXRUN_RDZV_TOKEN");
  if (!extras.host_name.empty()) set("MXRUN_HOST", extras.host_name);
  if (!extras.log_dir.empty()) set("MXRUN_LOG_DIR", extras.log_dir);
  if (extras.heartbeat_file.empty()) {
    env.erase("MXRUN_HEARTBEAT_FILE");  // an outer launcher's file is not this worker's
  } else {
    set("MXRUN_HEARTBEAT_FILE", extras.heartbeat_file);
  }
  if (!extras.timer_file.empty()) set("TORCHELASTIC_TIMER_FILE", extras.timer_file);
  if (!extras.nccl_trace_prefix.empty()) {
    env.emplace("TORCH_NCCL_DEBUG_INFO_TEMP_FILE", extras.nccl_trace_prefix);
  }
  // An outer launcher's channel and failure time are not this worker's.
  env.erase("MXRUN_CONTROL_FD");
  env.erase("MXRUN_FAILURE_TIME");
  env.erase("MXRUN_ROUND");
  env.erase("MXRUN_STANDBY");
  env.erase("MXRUN_FLIGHT_SOCKET");
  if (!extras.flight_socket.empty()) set("MXRUN_FLIGHT_SOCKET", extras.flight_socket);
  if (extras.control_channel) set("MXRUN_CONTROL_FD", "3");
  if (extras.round >= 0) set("MXRUN_ROUND", std::to_string(extras.round));
  if (!extras.virtual_device.empty()) {
    // torchrun 2.x's virtual local rank: the worker's one GPU is its device 0.
    set("LOCAL_RANK", "0");
    set("CUDA_VISIBLE_DEVICES", extras.virtual_device);
  }
  if (extras.failure_time > 0) {
    char text[32];
    std::snprintf(text, sizeof(text), "%.6f", extras.failure_time);
    set("MXRUN_FAILURE_TIME", text);
  }
  return env;
}

}  // namespace mxrun
