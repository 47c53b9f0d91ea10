#include "trainer/synthetic_data.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <random>

namespace mxrun::trainer {

ImageSet MakeSyntheticImages(std::int64_t count, int num_classes, std::uint64_t seed) {
  ImageSet set;
  set.labels.resize(count);
  set.pixels.resize(count * kImageBytes);
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> noise(0.0f, 64.0f);
  std::uniform_real_distribution<float> phase(0.0f, 2.0f * std::numbers::pi_v<float>);
  for (std::int64_t i = 0; i < count; ++i) {
    const int label = static_cast<int>(i % num_classes);
    set.labels[i] = static_cast<std::uint8_t>(label);
    // Class signature: a colour balance (three levels per channel, distinct per class) and a
    // stripe frequency; stripes run vertically for even classes and horizontally for odd ones,
    // both unchanged in kind by a horizontal flip or a shift.
    const float base[3] = {90.0f + 35.0f * (label % 3), 90.0f + 35.0f * ((label / 3) % 3),
                           90.0f + 35.0f * ((label / 2) % 3)};
    const float frequency = 2.0f * std::numbers::pi_v<float> * (1 + label / 2) / kImageSide;
    const bool vertical = label % 2 == 0;
    const float shift = phase(rng);
    std::uint8_t* image = set.pixels.data() + i * kImageBytes;
    for (int c = 0; c < kImageChannels; ++c) {
      for (int y = 0; y < kImageSide; ++y) {
        for (int x = 0; x < kImageSide; ++x) {
          const float stripe = 30.0f * std::sin(frequency * (vertical ? x : y) + shift);
          const float value = base[c] + stripe + noise(rng);
          image[(c * kImageSide + y) * kImageSide + x] =
              static_cast<std::uint8_t>(std::clamp(value, 0.0f, 255.0f));
        }
      }
    }
  }
  return set;
}

}  // namespace mxrun::trainer
