#include "trainer/cifar10.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <vector>

namespace mxrun::trainer {

void AppendCifar10File(const std::string& path, ImageSet& into) {
  std::unique_ptr<FILE, int (*)(FILE*)> file(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!file) {
    throw std::runtime_error("cannot open CIFAR-10 file " + path + ": " + std::strerror(errno));
  }
  // Read into locals and append only a whole, valid file: a bad file leaves `into` as it was.
  std::vector<std::uint8_t> labels, pixels;
  std::uint8_t record[kCifarRecordBytes];
  long offset = 0;
  for (;;) {
    const std::size_t got = std::fread(record, 1, sizeof(record), file.get());
    if (got == 0) break;
    if (got != sizeof(record)) {
      throw std::runtime_error(
          "CIFAR-10 file " + path + " is truncated: the record at byte offset " +
          std::to_string(offset) + " has " + std::to_string(got) + " of " +
          std::to_string(kCifarRecordBytes) + " bytes (1 label byte + 3072 pixel bytes)");
    }
    if (record[0] >= 10) {
      throw std::runtime_error("CIFAR-10 file " + path + " is corrupt: label " +
                               std::to_string(int{record[0]}) + " at byte offset " +
                               std::to_string(offset) + " is not a class index in 0-9");
    }
    labels.push_back(record[0]);
    pixels.insert(pixels.end(), record + 1, record + kCifarRecordBytes);
    offset += kCifarRecordBytes;
  }
  if (std::ferror(file.get())) {
    throw std::runtime_error("read error in CIFAR-10 file " + path + " at byte offset " +
                             std::to_string(offset));
  }
  if (offset == 0) {
    throw std::runtime_error("CIFAR-10 file " + path + " is empty");
  }
  into.labels.insert(into.labels.end(), labels.begin(), labels.end());
  into.pixels.insert(into.pixels.end(), pixels.begin(), pixels.end());
}

ImageSet ReadCifar10(const std::string& dir, Split split) {
  ImageSet set;
  const int files = split == Split::kTrain ? 5 : 1;
  set.labels.reserve(files * 10000);
  set.pixels.reserve(static_cast<std::size_t>(files) * 10000 * kImageBytes);
  for (int i = 1; i <= files; ++i) {
    const std::string name = split == Split::kTrain ? "data_batch_" + std::to_string(i) + ".bin"
                                                    : std::string("test_batch.bin");
    AppendCifar10File(dir + "/" + name, set);
  }
  return set;
}

}  // namespace mxrun::trainer
