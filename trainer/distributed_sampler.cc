#include "trainer/distributed_sampler.h"

#include <numeric>
#include <random>
#include <utility>

namespace mxrun::trainer {

std::vector<std::int64_t> TorchRandperm(std::int64_t n, std::uint64_t seed) {
  std::vector<std::int64_t> perm(n);
  std::iota(perm.begin(), perm.end(), 0);
  // PyTorch's CPUGeneratorImpl: at::mt19937 seeded with the low 32 bits, the same sequence as
  // std::mt19937. randperm_cpu swaps element i with i + random() % (n - i).
  std::mt19937 engine(static_cast<std::uint32_t>(seed));
  for (std::int64_t i = 0; i + 1 < n; ++i) {
    const std::int64_t z = static_cast<std::int64_t>(engine() % static_cast<std::uint64_t>(n - i));
    std::swap(perm[i], perm[i + z]);
  }
  return perm;
}

std::int64_t SamplesPerRank(const SamplerConfig& c) {
  const std::int64_t n = c.dataset_size;
  const std::int64_t w = c.world_size;
  if (c.drop_last && n % w != 0) return (n - w + w - 1) / w;  // ceil((n - w) / w)
  return (n + w - 1) / w;
}

std::vector<std::int64_t> ShardIndices(const SamplerConfig& c, std::int64_t epoch) {
  std::vector<std::int64_t> indices;
  if (c.shuffle) {
    indices = TorchRandperm(c.dataset_size, c.seed + static_cast<std::uint64_t>(epoch));
  } else {
    indices.resize(c.dataset_size);
    std::iota(indices.begin(), indices.end(), 0);
  }
  const std::int64_t total = SamplesPerRank(c) * c.world_size;
  if (!c.drop_last) {
    // Pad by repeating the list from its start, as many times as needed.
    const std::int64_t original = static_cast<std::int64_t>(indices.size());
    for (std::int64_t i = 0; static_cast<std::int64_t>(indices.size()) < total; ++i) {
      indices.push_back(indices[i % original]);
    }
  } else {
    indices.resize(total);
  }
  std::vector<std::int64_t> shard;
  shard.reserve(SamplesPerRank(c));
  for (std::int64_t i = c.rank; i < total; i += c.world_size) shard.push_back(indices[i]);
  return shard;
}

}  // namespace mxrun::trainer
