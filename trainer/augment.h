#pragma once
// Turning stored image bytes into the network's input: per-channel normalisation and, for
// training, torchvision's RandomCrop(32, padding=4) and RandomHorizontalFlip(). The random choices
// are a pure function of (seed, epoch, image index), so a resumed or re-sharded run sees the same
// augmentation for the same sample without carrying generator state.

#include <cstdint>

#include "trainer/image_set.h"

namespace mxrun::trainer {

struct Normalization {
  float mean[3];
  float std[3];
};
inline constexpr Normalization kCifarNormalization{{0.4914f, 0.4822f, 0.4465f},
                                                   {0.2470f, 0.2435f, 0.2616f}};

struct AugmentConfig {
  bool crop_and_flip = false;
  int padding = 4;
  std::uint64_t seed = 0;
  std::int64_t epoch = 0;
  Normalization normalization = kCifarNormalization;
};

// The crop offset (0..2*padding on each axis) and flip chosen for one sample.
struct CropChoice {
  int dx = 0;
  int dy = 0;
  bool flip = false;
};
CropChoice ChooseCrop(const AugmentConfig& config, std::int64_t index);

// Writes image `index` of `set` as 3x32x32 floats (channel-major) into `out`. Padding pixels are
// zero bytes before normalisation, as torchvision pads the uint8 image.
void WriteSample(const ImageSet& set, std::int64_t index, const AugmentConfig& config, float* out);

}  // namespace mxrun::trainer
