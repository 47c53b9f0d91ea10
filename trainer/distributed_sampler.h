#pragma once
// torch.utils.data.DistributedSampler, index for index: a per-epoch shuffle seeded with
// seed + epoch through PyTorch's CPU generator (MT19937) and torch.randperm's swap algorithm,
// padding by repeating indices so every rank gets the same count (or trimming with drop_last),
// then rank r takes every world_size-th index starting at r.

#include <cstdint>
#include <vector>

namespace mxrun::trainer {

struct SamplerConfig {
  std::int64_t dataset_size = 0;
  int world_size = 1;
  int rank = 0;
  bool shuffle = true;
  std::uint64_t seed = 0;
  bool drop_last = false;
};

// Samples per rank in one epoch (DistributedSampler.num_samples).
std::int64_t SamplesPerRank(const SamplerConfig& config);

// The indices rank `config.rank` visits in `epoch`, in order.
std::vector<std::int64_t> ShardIndices(const SamplerConfig& config, std::int64_t epoch);

// torch.randperm(n, generator=torch.Generator().manual_seed(seed)).tolist()
std::vector<std::int64_t> TorchRandperm(std::int64_t n, std::uint64_t seed);

}  // namespace mxrun::trainer
