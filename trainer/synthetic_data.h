#pragma once
// A synthetic dataset in CIFAR-10's shape whose classes can be learned, so the trainer shows
// accuracy rising on a machine with no downloads. Each class has its own colour balance and a
// stripe pattern of its own frequency; every image adds a random phase and strong pixel noise, so
// a model has to learn the patterns rather than memorise images. Random crops and horizontal
// flips (the training augmentation) keep an image's class recognisable.
//
// Pixel noise is N(0, 64^2), drawn through a quantile table (synthetic_data.cc says why).
// Each image draws from its own generator, seeded by (seed, index): images are independent of
// each other, so the set is made by several threads at once and is the same for any thread count.
// It is on a restarting worker's critical path (50,000 images before the first step).

#include <cstdint>

#include "trainer/image_set.h"

namespace mxrun::trainer {

// `count` images, classes in rotation (balanced), deterministic for a given `seed`, made by
// `threads` threads (at least one).
ImageSet MakeSyntheticImages(std::int64_t count, int num_classes, std::uint64_t seed,
                             int threads = 1);

}  // namespace mxrun::trainer
