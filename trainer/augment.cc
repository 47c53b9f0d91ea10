#include "trainer/augment.h"

namespace mxrun::trainer {
namespace {

// SplitMix64: a fast, well-mixed hash of the (seed, epoch, index) triple.
std::uint64_t Mix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

}  // namespace

CropChoice ChooseCrop(const AugmentConfig& config, std::int64_t index) {
  if (!config.crop_and_flip) return {config.padding, config.padding, false};
  const std::uint64_t h = Mix(Mix(config.seed ^ Mix(static_cast<std::uint64_t>(config.epoch))) ^
                              static_cast<std::uint64_t>(index));
  const int span = 2 * config.padding + 1;
  return {static_cast<int>(h % span), static_cast<int>((h >> 16) % span), ((h >> 32) & 1) != 0};
}

void WriteSample(const ImageSet& set, std::int64_t index, const AugmentConfig& config, float* out) {
  const std::uint8_t* image = set.image(index);
  const CropChoice crop = ChooseCrop(config, index);
  for (int c = 0; c < kImageChannels; ++c) {
    const float scale = 1.0f / (255.0f * config.normalization.std[c]);
    const float shift = config.normalization.mean[c] / config.normalization.std[c];
    const std::uint8_t* plane = image + c * kImageSide * kImageSide;
    float* out_plane = out + c * kImageSide * kImageSide;
    for (int y = 0; y < kImageSide; ++y) {
      // Output pixel (x, y) reads padded pixel (x + dx, y + dy), i.e. source (x + dx - pad, ...).
      const int sy = y + crop.dy - config.padding;
      for (int x = 0; x < kImageSide; ++x) {
        const int ox = crop.flip ? kImageSide - 1 - x : x;
        const int sx = ox + crop.dx - config.padding;
        const bool inside = sy >= 0 && sy < kImageSide && sx >= 0 && sx < kImageSide;
        const float byte = inside ? plane[sy * kImageSide + sx] : 0.0f;
        out_plane[y * kImageSide + x] = byte * scale - shift;
      }
    }
  }
}

}  // namespace mxrun::trainer
