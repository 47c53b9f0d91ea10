#include "trainer/synthetic_data.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <numbers>
#include <thread>
#include <vector>

namespace mxrun::trainer {
namespace {

// SplitMix64: a tiny generator whose every output is a good hash of a counter; seeding it with
// (seed, index) gives each image its own stream at no set-up cost.
class SplitMix64 {
 public:
  explicit SplitMix64(std::uint64_t state) : state_(state) {}
  std::uint64_t Next() {
    std::uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // Uniform in (0, 1]: never 0, so its logarithm is finite.
  float Uniform() { return static_cast<float>((Next() >> 40) + 1) * 0x1.0p-24f; }

 private:
  std::uint64_t state_;
};

constexpr float kTwoPi = 2.0f * std::numbers::pi_v<float>;
constexpr int kNoiseBits = 12;
constexpr int kNoiseLevels = 1 << kNoiseBits;

// N(0, 64^2) by table: entry k is the normal quantile at (k + 0.5) / 4096, times 64, so a
// uniform 12-bit index draws from the normal distribution (to +-3.7 sigma); one 64-bit draw gives
// five pixels' noise. Drawing with log, sqrt and cos per pixel pair made generation the largest
// part of a worker's start (about 2 s of 50,000 images).
const std::array<float, kNoiseLevels>& NoiseTable() {
  static const std::array<float, kNoiseLevels> table = [] {
    std::array<float, kNoiseLevels> t{};
    for (int k = 0; k < kNoiseLevels; ++k) {
      const double p = (k + 0.5) / kNoiseLevels;
      double lo = -10, hi = 10;  // the quantile by bisection on the CDF
      for (int i = 0; i < 60; ++i) {
        const double mid = (lo + hi) / 2;
        (0.5 * std::erfc(-mid / std::numbers::sqrt2) < p ? lo : hi) = mid;
      }
      t[k] = static_cast<float>(64.0 * (lo + hi) / 2);
    }
    return t;
  }();
  return table;
}

void MakeImage(std::int64_t index, int num_classes, std::uint64_t seed, std::uint8_t* image,
               std::uint8_t* label_out) {
  const int label = static_cast<int>(index % num_classes);
  *label_out = static_cast<std::uint8_t>(label);
  SplitMix64 rng(seed * 0xD1B54A32D192ED03ull + static_cast<std::uint64_t>(index));
  // Class signature: a colour balance (three levels per channel, distinct per class) and a
  // stripe frequency; stripes run vertically for even classes and horizontally for odd ones,
  // both unchanged in kind by a horizontal flip or a shift.
  const float base[3] = {90.0f + 35.0f * (label % 3), 90.0f + 35.0f * ((label / 3) % 3),
                         90.0f + 35.0f * ((label / 2) % 3)};
  const float frequency = kTwoPi * (1 + label / 2) / kImageSide;
  const bool vertical = label % 2 == 0;
  const float shift = kTwoPi * rng.Uniform();
  float stripe[kImageSide];
  for (int i = 0; i < kImageSide; ++i) stripe[i] = 30.0f * std::sin(frequency * i + shift);
  const std::array<float, kNoiseLevels>& noise = NoiseTable();
  std::uint64_t bits = 0;
  int left = 0;
  for (int c = 0; c < kImageChannels; ++c) {
    for (int y = 0; y < kImageSide; ++y) {
      for (int x = 0; x < kImageSide; ++x) {
        if (left == 0) bits = rng.Next(), left = 5;
        const float value = base[c] + stripe[vertical ? x : y] + noise[bits & (kNoiseLevels - 1)];
        bits >>= kNoiseBits;
        --left;
        *image++ = static_cast<std::uint8_t>(std::clamp(value, 0.0f, 255.0f));
      }
    }
  }
}

}  // namespace

ImageSet MakeSyntheticImages(std::int64_t count, int num_classes, std::uint64_t seed, int threads) {
  ImageSet set;
  set.labels.resize(count);
  set.pixels.resize(count * kImageBytes);
  auto make_range = [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t i = begin; i < end; ++i) {
      MakeImage(i, num_classes, seed, set.pixels.data() + i * kImageBytes, &set.labels[i]);
    }
  };
  const std::int64_t workers =
      std::clamp<std::int64_t>(threads, 1, std::max<std::int64_t>(count, 1));
  std::vector<std::thread> pool;
  const std::int64_t per = (count + workers - 1) / workers;
  for (std::int64_t w = 1; w < workers; ++w) {
    pool.emplace_back(make_range, std::min(count, w * per), std::min(count, (w + 1) * per));
  }
  make_range(0, std::min(count, per));
  for (auto& t : pool) t.join();
  return set;
}

}  // namespace mxrun::trainer
