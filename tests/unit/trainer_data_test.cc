// The trainer's data path without LibTorch: the CIFAR-10 reader, synthetic data, augmentation,
// sharding and the background batch loader.
#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <numeric>
#include <set>
#include <stdexcept>

#include "tests/temp_dir.h"
#include "trainer/augment.h"
#include "trainer/batch_loader.h"
#include "trainer/cifar10.h"
#include "trainer/distributed_sampler.h"
#include "trainer/synthetic_data.h"

using namespace mxrun::trainer;
namespace {

using mxrun::testing::TempDir;

// Writes `records` CIFAR records: label i % 10, every pixel byte of record i equal to i % 256.
void WriteCifarFile(const std::string& path, int records, int extra_bytes = 0,
                    int bad_label_at = -1) {
  std::ofstream out(path, std::ios::binary);
  for (int i = 0; i < records; ++i) {
    const char label = static_cast<char>(i == bad_label_at ? 11 : i % 10);
    out.put(label);
    std::string pixels(kImageBytes, static_cast<char>(i % 256));
    out.write(pixels.data(), pixels.size());
  }
  out.write(std::string(extra_bytes, '\0').data(), extra_bytes);
}

std::string ErrorOf(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace

TEST_CASE("the CIFAR-10 reader loads every record of the five training files in order", "[cifar]") {
  TempDir dir;
  for (int i = 1; i <= 5; ++i) {
    WriteCifarFile(dir.path() + "/data_batch_" + std::to_string(i) + ".bin", 3);
  }
  WriteCifarFile(dir.path() + "/test_batch.bin", 4);
  ImageSet train = ReadCifar10(dir.path(), Split::kTrain);
  REQUIRE(train.size() == 15);
  CHECK(train.labels[0] == 0);
  CHECK(train.labels[4] == 1);  // second file, second record
  CHECK(train.image(4)[0] == 1);
  CHECK(train.image(4)[kImageBytes - 1] == 1);
  ImageSet test = ReadCifar10(dir.path(), Split::kTest);
  CHECK(test.size() == 4);
  CHECK(test.labels[3] == 3);
}

TEST_CASE("a truncated CIFAR-10 file is an error naming the file and offset", "[cifar]") {
  TempDir dir;
  const std::string path = dir.path() + "/test_batch.bin";
  WriteCifarFile(path, 2, /*extra_bytes=*/100);
  ImageSet set;
  const std::string error = ErrorOf([&] { AppendCifar10File(path, set); });
  CHECK_THAT(error, Catch::Contains(path));
  CHECK_THAT(error, Catch::Contains("truncated"));
  CHECK_THAT(error, Catch::Contains("byte offset 6146"));
  CHECK(set.size() == 0);  // nothing of the bad file is kept
}

TEST_CASE("a label outside 0-9 is corruption, reported with its offset", "[cifar]") {
  TempDir dir;
  const std::string path = dir.path() + "/test_batch.bin";
  WriteCifarFile(path, 3, 0, /*bad_label_at=*/2);
  ImageSet set;
  const std::string error = ErrorOf([&] { AppendCifar10File(path, set); });
  CHECK_THAT(error, Catch::Contains("label 11 at byte offset 6146"));
}

TEST_CASE("a missing CIFAR-10 file names the file", "[cifar]") {
  TempDir dir;
  const std::string error = ErrorOf([&] { ReadCifar10(dir.path(), Split::kTest); });
  CHECK_THAT(error, Catch::Contains(dir.path() + "/test_batch.bin"));
  CHECK_THAT(error, Catch::Contains("No such file"));
}

TEST_CASE("synthetic data is balanced, deterministic and in CIFAR's shape", "[synthetic]") {
  ImageSet a = MakeSyntheticImages(100, 10, 7);
  ImageSet b = MakeSyntheticImages(100, 10, 7);
  ImageSet c = MakeSyntheticImages(100, 10, 8);
  CHECK(a.size() == 100);
  CHECK(a.pixels.size() == 100u * kImageBytes);
  CHECK(a.pixels == b.pixels);
  CHECK(a.pixels != c.pixels);
  std::vector<int> per_class(10);
  for (auto label : a.labels) per_class[label]++;
  CHECK(per_class == std::vector<int>(10, 10));
}

TEST_CASE("synthetic data is the same for any number of generating threads", "[synthetic]") {
  const ImageSet one = MakeSyntheticImages(101, 10, 7, 1);
  for (int threads : {2, 3, 16, 500}) {
    INFO(threads << " threads");
    const ImageSet many = MakeSyntheticImages(101, 10, 7, threads);
    CHECK(many.pixels == one.pixels);
    CHECK(many.labels == one.labels);
  }
  CHECK(MakeSyntheticImages(0, 10, 7, 4).size() == 0);
}

TEST_CASE("synthetic pixel noise has the intended spread", "[synthetic]") {
  // Neighbouring pixels of one row of a horizontally striped class (1) share colour and stripe,
  // so their differences are noise alone: variance 2 * 64^2 before clamping; the class colour
  // (125 in channel 0) keeps clamping rare.
  const ImageSet set = MakeSyntheticImages(200, 10, 3);
  double sum = 0, sum_sq = 0;
  std::int64_t n = 0;
  for (std::int64_t i = 1; i < set.size(); i += 10) {
    for (int y = 0; y < 32; ++y) {
      for (int x = 0; x + 1 < 32; ++x) {
        const double d = double(set.image(i)[y * 32 + x + 1]) - set.image(i)[y * 32 + x];
        sum += d;
        sum_sq += d * d;
        ++n;
      }
    }
  }
  const double sd = std::sqrt(sum_sq / n - (sum / n) * (sum / n)) / std::sqrt(2.0);
  CHECK(sd > 55);
  CHECK(sd < 66);
  CHECK(std::abs(sum / n) < 2);
}

TEST_CASE("synthetic classes differ on average more than images of one class", "[synthetic]") {
  // The mean colour of a class is its signature: two images of class 0 are closer in mean colour
  // than an image of class 0 and one of class 1.
  ImageSet set = MakeSyntheticImages(40, 10, 1);
  auto mean_colour = [&](int i) {
    std::array<double, 3> m{};
    for (int c = 0; c < 3; ++c) {
      for (int p = 0; p < 1024; ++p) m[c] += set.image(i)[c * 1024 + p];
      m[c] /= 1024;
    }
    return m;
  };
  auto distance = [](auto a, auto b) {
    double d = 0;
    for (int c = 0; c < 3; ++c) d += (a[c] - b[c]) * (a[c] - b[c]);
    return d;
  };
  CHECK(distance(mean_colour(0), mean_colour(10)) < distance(mean_colour(0), mean_colour(1)));
}

TEST_CASE("without augmentation a sample is normalised per channel", "[augment]") {
  ImageSet set;
  set.labels = {3};
  set.pixels.assign(kImageBytes, 0);
  for (int p = 0; p < 1024; ++p) set.pixels[p] = 255;  // red plane white, others black
  std::vector<float> out(kImageBytes);
  WriteSample(set, 0, AugmentConfig{}, out.data());
  const Normalization& n = kCifarNormalization;
  CHECK(out[0] == Approx((1.0 - n.mean[0]) / n.std[0]));
  CHECK(out[1024] == Approx((0.0 - n.mean[1]) / n.std[1]));
  CHECK(out[2047] == Approx((0.0 - n.mean[1]) / n.std[1]));
}

TEST_CASE("random crops stay within the padding and flips mirror rows", "[augment]") {
  ImageSet set;
  set.labels = {0};
  set.pixels.resize(kImageBytes);
  for (int c = 0; c < 3; ++c)
    for (int y = 0; y < 32; ++y)
      for (int x = 0; x < 32; ++x) set.pixels[(c * 32 + y) * 32 + x] = static_cast<uint8_t>(x * 8);
  AugmentConfig config;
  config.crop_and_flip = true;
  std::set<int> dxs;
  bool saw_flip = false, saw_plain = false;
  for (int epoch = 0; epoch < 64; ++epoch) {
    config.epoch = epoch;
    const CropChoice crop = ChooseCrop(config, 0);
    REQUIRE(crop.dx >= 0);
    REQUIRE(crop.dx <= 8);
    REQUIRE(crop.dy >= 0);
    REQUIRE(crop.dy <= 8);
    dxs.insert(crop.dx);
    (crop.flip ? saw_flip : saw_plain) = true;
    std::vector<float> out(kImageBytes);
    WriteSample(set, 0, config, out.data());
    // Row 16 of the red plane: source column for output x is (flip ? 31 - x : x) + dx - 4.
    for (int x = 0; x < 32; ++x) {
      const int sx = (crop.flip ? 31 - x : x) + crop.dx - 4;
      const int sy = 16 + crop.dy - 4;
      const float byte = (sx >= 0 && sx < 32 && sy >= 0 && sy < 32) ? sx * 8 : 0;
      REQUIRE(out[16 * 32 + x] == Approx(byte / (255.0f * kCifarNormalization.std[0]) -
                                         kCifarNormalization.mean[0] / kCifarNormalization.std[0]));
    }
  }
  CHECK(dxs.size() >= 5);  // offsets vary across epochs
  CHECK(saw_flip);
  CHECK(saw_plain);
  // The same (seed, epoch, index) always gives the same choice: resumes see the same data.
  config.epoch = 3;
  CHECK(ChooseCrop(config, 17).dx == ChooseCrop(config, 17).dx);
}

TEST_CASE("shards cover the padded epoch exactly once and have equal sizes", "[sampler]") {
  for (int world : {1, 2, 3, 7}) {
    for (bool drop_last : {false, true}) {
      SamplerConfig c{100, world, 0, true, 5, drop_last};
      std::multiset<int64_t> all;
      for (int rank = 0; rank < world; ++rank) {
        c.rank = rank;
        auto shard = ShardIndices(c, 2);
        REQUIRE(static_cast<int64_t>(shard.size()) == SamplesPerRank(c));
        all.insert(shard.begin(), shard.end());
      }
      std::set<int64_t> distinct(all.begin(), all.end());
      if (drop_last) {
        CHECK(all.size() == distinct.size());  // no repeats
        CHECK(static_cast<int64_t>(all.size()) == (100 / world) * world);
      } else {
        CHECK(distinct.size() == 100u);  // every sample, padding repeats a few
        CHECK(static_cast<int64_t>(all.size()) == ((100 + world - 1) / world) * world);
      }
    }
  }
}

TEST_CASE("torch.randperm's values are reproduced", "[sampler]") {
  // From PyTorch 1.13: torch.randperm(10, generator=torch.Generator().manual_seed(s)).tolist().
  // The integration parity test compares many more lists against Python itself.
  CHECK(TorchRandperm(10, 0) == std::vector<int64_t>{4, 1, 7, 5, 3, 9, 0, 8, 6, 2});
  CHECK(TorchRandperm(10, 5) == std::vector<int64_t>{1, 4, 9, 6, 3, 5, 0, 2, 8, 7});
  // The generator keeps the low 32 bits of the seed.
  CHECK(TorchRandperm(10, (1ULL << 32) + 5) == TorchRandperm(10, 5));
}

TEST_CASE("the batch loader hands out every index once, in order, in batches", "[loader]") {
  ImageSet set = MakeSyntheticImages(50, 10, 3);
  std::vector<int64_t> indices(23);
  std::iota(indices.begin(), indices.end(), 10);
  BatchLoader loader(set, indices, 5, AugmentConfig{}, 3, 2, nullptr);
  CHECK(loader.num_batches() == 5);
  std::vector<int64_t> labels;
  int64_t number = 0;
  while (auto batch = loader.Next()) {
    CHECK(batch->number == number++);
    CHECK(batch->size == (batch->number == 4 ? 3 : 5));
    for (int64_t i = 0; i < batch->size; ++i) labels.push_back(batch->storage.labels[i]);
  }
  REQUIRE(labels.size() == 23u);
  for (size_t i = 0; i < labels.size(); ++i) CHECK(labels[i] == set.labels[indices[i]]);
  CHECK_FALSE(loader.Next().has_value());
}

TEST_CASE("a loader destroyed early stops its threads", "[loader]") {
  ImageSet set = MakeSyntheticImages(64, 10, 3);
  std::vector<int64_t> indices(64);
  std::iota(indices.begin(), indices.end(), 0);
  std::atomic<int> assembled{0};
  auto counting = [&](int64_t n) {
    ++assembled;
    return AllocateOnHeap(n);
  };
  auto loader = std::make_unique<BatchLoader>(set, indices, 4, AugmentConfig{}, 2, 2, counting);
  CHECK(loader->Next().has_value());
  loader.reset();  // joins its threads (a hang here is caught by the test's time-out)
  // Of the 16 batches, the loader assembled only the one handed out and the 2 it prefetches.
  CHECK(assembled.load() <= 3);
}
