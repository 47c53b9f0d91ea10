#include "trainer/bucket_plan.h"

#include <map>

namespace mxrun::trainer {

std::vector<std::vector<int>> PlanBuckets(const std::vector<ParamInfo>& params,
                                          std::int64_t first_bucket_bytes,
                                          std::int64_t bucket_bytes) {
  struct Open {
    std::vector<int> members;
    std::int64_t bytes = 0;
  };
  std::vector<std::vector<int>> buckets;
  std::map<int, Open> open;  // one open bucket per dtype/device key
  for (int i = static_cast<int>(params.size()) - 1; i >= 0; --i) {
    Open& bucket = open[params[i].dtype_and_device];
    bucket.members.push_back(i);
    bucket.bytes += params[i].bytes;
    const std::int64_t limit = buckets.empty() ? first_bucket_bytes : bucket_bytes;
    if (bucket.bytes >= limit) {
      buckets.push_back(std::move(bucket.members));
      bucket = Open{};
    }
  }
  for (auto& [key, bucket] : open) {
    if (!bucket.members.empty()) buckets.push_back(std::move(bucket.members));
  }
  return buckets;
}

}  // namespace mxrun::trainer
