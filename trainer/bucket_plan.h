#pragma once
// Grouping gradients into all-reduce buckets the way PyTorch DDP does
// (compute_bucket_assignment_by_size): walk the parameters in reverse order of their
// registration, which is roughly the order backward produces their gradients, and close a
// bucket once it holds at least its byte limit. The first bucket has a small limit (1 MiB in
// DDP) so communication starts early in backward; the rest use bucket_cap_mb (25 MiB).
// Parameters of different dtypes or devices never share a bucket.

#include <cstdint>
#include <vector>

namespace mxrun::trainer {

struct ParamInfo {
  std::int64_t bytes = 0;
  int dtype_and_device = 0;  // parameters with different keys go to different buckets
};

inline constexpr std::int64_t kDefaultFirstBucketBytes = 1 << 20;

// Returns buckets of parameter indices (into `params`). Buckets are listed in the order they
// fill during backward; indices inside a bucket are in reverse registration order.
std::vector<std::vector<int>> PlanBuckets(const std::vector<ParamInfo>& params,
                                          std::int64_t first_bucket_bytes,
                                          std::int64_t bucket_bytes);

}  // namespace mxrun::trainer
