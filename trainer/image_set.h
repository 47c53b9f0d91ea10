#pragma once
// A labelled set of 32x32 RGB images held as raw bytes, in CIFAR-10's own layout: one image is
// 3072 bytes, channel-major (1024 red, 1024 green, 1024 blue), rows top to bottom.

#include <cstdint>
#include <string>
#include <vector>

namespace mxrun::trainer {

inline constexpr int kImageSide = 32;
inline constexpr int kImageChannels = 3;
inline constexpr int kImageBytes = kImageSide * kImageSide * kImageChannels;  // 3072

struct ImageSet {
  std::vector<std::uint8_t> pixels;  // size() == labels.size() * kImageBytes
  std::vector<std::uint8_t> labels;  // class index per image

  std::int64_t size() const { return static_cast<std::int64_t>(labels.size()); }
  const std::uint8_t* image(std::int64_t i) const { return pixels.data() + i * kImageBytes; }
};

}  // namespace mxrun::trainer
