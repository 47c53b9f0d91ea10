#pragma once
// Which GPU a local rank drives, as torchrun 2.x decides it for --virtual-local-rank: the
// local_rank-th entry of the agent's CUDA_VISIBLE_DEVICES when that is set (indices, GPU-... UUIDs
// and MIG-... ids alike), else the local rank itself as an index. Pure; no Abseil (the worker
// contract library links it).

#include <optional>
#include <string>
#include <vector>

#include "common/env_contract.h"

namespace mxrun {

// torchrun's split of CUDA_VISIBLE_DEVICES: entries separated by ',', surrounding blanks removed.
std::vector<std::string> SplitVisibleDevices(const std::string& cuda_visible_devices);

// The device entry of `local_rank`; nullopt when CUDA_VISIBLE_DEVICES is set and lists fewer.
std::optional<std::string> DeviceOfLocalRank(const EnvMap& agent_env, int local_rank);

}  // namespace mxrun
