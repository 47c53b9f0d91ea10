#include "common/worker_env.h"

#include <charconv>
#include <stdexcept>

namespace mxrun {
namespace {

const std::string* Find(const EnvMap& env, const std::string& key) {
  auto it = env.find(key);
  return it == env.end() ? nullptr : &it->second;
}

// Reads `key` as an integer in [lo, hi]; `fallback` when it is unset.
int IntVar(const EnvMap& env, const std::string& key, int fallback, int lo, int hi) {
  const std::string* value = Find(env, key);
  if (value == nullptr) return fallback;
  int parsed = 0;
  const char* end = value->data() + value->size();
  auto [ptr, ec] = std::from_chars(value->data(), end, parsed);
  if (value->empty() || ec != std::errc() || ptr != end || parsed < lo || parsed > hi) {
    throw std::invalid_argument(key + "='" + *value + "' is not an integer in [" +
                                std::to_string(lo) + ", " + std::to_string(hi) + "]");
  }
  return parsed;
}

}  // namespace

WorkerIdentity ReadWorkerIdentity(const EnvMap& env) {
  WorkerIdentity id;
  const bool has_rank = Find(env, "RANK") != nullptr;
  const bool has_world = Find(env, "WORLD_SIZE") != nullptr;
  const bool has_port = Find(env, "MASTER_PORT") != nullptr;
  if (!has_rank && !has_world && !has_port) return id;  // alone: rank 0 of 1
  if (!has_rank || !has_world) {
    throw std::invalid_argument(
        "RANK and WORLD_SIZE must both be set (run under mxrun or torchrun, or set neither to run "
        "as a single process)");
  }
  id.world_size = IntVar(env, "WORLD_SIZE", 1, 1, 1 << 20);
  id.rank = IntVar(env, "RANK", 0, 0, id.world_size - 1);
  id.local_world_size = IntVar(env, "LOCAL_WORLD_SIZE", 1, 1, id.world_size);
  id.local_rank = IntVar(env, "LOCAL_RANK", 0, 0, id.local_world_size - 1);
  id.restart_count = IntVar(env, "TORCHELASTIC_RESTART_COUNT", 0, 0, 1 << 30);

  if (const std::string* addr = Find(env, "MASTER_ADDR")) id.master_addr = *addr;
  id.master_port = IntVar(env, "MASTER_PORT", 0, 1, 65535);  // 0 when unset
  if (id.world_size > 1 && (id.master_addr.empty() || id.master_port == 0)) {
    throw std::invalid_argument(
        "WORLD_SIZE=" + std::to_string(id.world_size) +
        " needs MASTER_ADDR and MASTER_PORT (where rank 0 hosts the store)");
  }
  if (id.master_addr.empty() && id.master_port != 0) id.master_addr = "127.0.0.1";
  if (const std::string* agent_store = Find(env, "TORCHELASTIC_USE_AGENT_STORE")) {
    id.use_agent_store = *agent_store == "True";
  }
  if (const std::string* error_file = Find(env, "TORCHELASTIC_ERROR_FILE")) {
    id.error_file = *error_file;
  }
  if (const std::string* run_id = Find(env, "TORCHELASTIC_RUN_ID")) id.run_id = *run_id;
  if (const std::string* heartbeat = Find(env, "MXRUN_HEARTBEAT_FILE")) {
    id.heartbeat_file = *heartbeat;
  }
  return id;
}

}  // namespace mxrun
