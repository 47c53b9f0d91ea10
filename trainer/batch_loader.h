#pragma once
// Background batch assembly: worker threads turn a rank's index list into ready-to-use batches
// (augmented, normalised floats plus labels) a few batches ahead of the training loop, in order.
// Memory comes from an injectable allocator so the LibTorch side can hand out pinned buffers for
// fast host-to-GPU copies; the loader itself knows nothing of LibTorch.

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "trainer/augment.h"
#include "trainer/image_set.h"

namespace mxrun::trainer {

struct BatchStorage {
  std::shared_ptr<void> owner;  // keeps the memory alive (a vector, a pinned tensor, ...)
  float* images = nullptr;      // batch x 3 x 32 x 32
  std::int64_t* labels = nullptr;
};
using BatchAllocator = std::function<BatchStorage(std::int64_t batch_size)>;
BatchStorage AllocateOnHeap(std::int64_t batch_size);

struct Batch {
  BatchStorage storage;
  std::int64_t size = 0;    // images in this batch (the last one may be short)
  std::int64_t number = 0;  // 0-based position in the epoch
};

class BatchLoader {
 public:
  // Batches of `batch_size` over `indices` (the last may be shorter). `threads` >= 1 workers keep
  // up to `prefetch` batches ready.
  BatchLoader(const ImageSet& set, std::vector<std::int64_t> indices, std::int64_t batch_size,
              AugmentConfig augment, int threads, int prefetch, BatchAllocator allocator);
  ~BatchLoader();
  BatchLoader(const BatchLoader&) = delete;
  BatchLoader& operator=(const BatchLoader&) = delete;

  std::int64_t num_batches() const { return num_batches_; }
  // The next batch in order, or nullopt after the last.
  std::optional<Batch> Next();

 private:
  void Work();
  Batch Assemble(std::int64_t number);

  const ImageSet& set_;
  const std::vector<std::int64_t> indices_;
  const std::int64_t batch_size_;
  const AugmentConfig augment_;
  const int prefetch_;
  const BatchAllocator allocator_;
  const std::int64_t num_batches_;

  std::mutex mutex_;
  std::condition_variable changed_;
  std::int64_t next_to_assemble_ = 0;    // guarded by mutex_
  std::int64_t next_to_hand_out_ = 0;    // guarded by mutex_
  bool stopping_ = false;                // guarded by mutex_
  std::map<std::int64_t, Batch> ready_;  // guarded by mutex_
  std::vector<std::thread> workers_;
};

}  // namespace mxrun::trainer
