#include "trainer/batch_loader.h"

#include <algorithm>

namespace mxrun::trainer {

BatchStorage AllocateOnHeap(std::int64_t batch_size) {
  struct Heap {
    std::vector<float> images;
    std::vector<std::int64_t> labels;
  };
  auto heap = std::make_shared<Heap>();
  heap->images.resize(batch_size * kImageBytes);
  heap->labels.resize(batch_size);
  BatchStorage storage;
  storage.images = heap->images.data();
  storage.labels = heap->labels.data();
  storage.owner = std::move(heap);
  return storage;
}

BatchLoader::BatchLoader(const ImageSet& set, std::vector<std::int64_t> indices,
                         std::int64_t batch_size, AugmentConfig augment, int threads, int prefetch,
                         BatchAllocator allocator)
    : set_(set),
      indices_(std::move(indices)),
      batch_size_(batch_size),
      augment_(augment),
      prefetch_(std::max(prefetch, 1)),
      allocator_(allocator ? std::move(allocator) : BatchAllocator(&AllocateOnHeap)),
      num_batches_((static_cast<std::int64_t>(indices_.size()) + batch_size - 1) / batch_size) {
  for (int i = 0; i < std::max(threads, 1); ++i) workers_.emplace_back([this] { Work(); });
}

BatchLoader::~BatchLoader() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  for (std::thread& t : workers_) t.join();
}

Batch BatchLoader::Assemble(std::int64_t number) {
  const std::int64_t begin = number * batch_size_;
  const std::int64_t end =
      std::min<std::int64_t>(begin + batch_size_, static_cast<std::int64_t>(indices_.size()));
  Batch batch;
  batch.number = number;
  batch.size = end - begin;
  batch.storage = allocator_(batch.size);
  for (std::int64_t i = begin; i < end; ++i) {
    const std::int64_t index = indices_[i];
    WriteSample(set_, index, augment_, batch.storage.images + (i - begin) * kImageBytes);
    batch.storage.labels[i - begin] = set_.labels[index];
  }
  return batch;
}

void BatchLoader::Work() {
  for (;;) {
    std::int64_t number;
    {
      std::unique_lock lock(mutex_);
      changed_.wait(lock, [this] {
        return stopping_ || (next_to_assemble_ < num_batches_ &&
                             next_to_assemble_ < next_to_hand_out_ + prefetch_);
      });
      if (stopping_) return;
      number = next_to_assemble_++;
    }
    Batch batch = Assemble(number);
    {
      std::lock_guard lock(mutex_);
      ready_.emplace(number, std::move(batch));
    }
    changed_.notify_all();
  }
}

std::optional<Batch> BatchLoader::Next() {
  std::unique_lock lock(mutex_);
  if (next_to_hand_out_ >= num_batches_) return std::nullopt;
  changed_.wait(lock, [this] { return ready_.count(next_to_hand_out_) > 0; });
  auto node = ready_.extract(next_to_hand_out_);
  ++next_to_hand_out_;
  lock.unlock();
  changed_.notify_all();
  return std::move(node.mapped());
}

}  // namespace mxrun::trainer
