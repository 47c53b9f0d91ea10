#include "trainer/tfrecord.h"

#include <cstdint>
#include <stdexcept>

#include "trainer/crc32c.h"

namespace mxrun::trainer {
namespace {

void PutLittleEndian(std::string& out, std::uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xFF));
}

std::uint64_t GetLittleEndian(std::string_view in, int bytes) {
  std::uint64_t value = 0;
  for (int i = 0; i < bytes; ++i) {
    value |= static_cast<std::uint64_t>(static_cast<std::uint8_t>(in[i])) << (8 * i);
  }
  return value;
}

[[noreturn]] void Bad(std::size_t offset, const std::string& what) {
  throw std::runtime_error("TFRecord at byte " + std::to_string(offset) + ": " + what);
}

}  // namespace

std::string FrameRecord(std::string_view data) {
  std::string out;
  out.reserve(data.size() + 16);
  PutLittleEndian(out, data.size(), 8);
  PutLittleEndian(out, MaskCrc32c(Crc32c(out)), 4);
  out.append(data);
  PutLittleEndian(out, MaskCrc32c(Crc32c(data)), 4);
  return out;
}

std::vector<std::string> ParseRecords(std::string_view bytes) {
  std::vector<std::string> records;
  std::size_t at = 0;
  while (at < bytes.size()) {
    if (bytes.size() - at < 12) Bad(at, "truncated header");
    const std::string_view length_bytes = bytes.substr(at, 8);
    if (GetLittleEndian(bytes.substr(at + 8, 4), 4) != MaskCrc32c(Crc32c(length_bytes))) {
      Bad(at, "the length's CRC does not match");
    }
    const std::uint64_t length = GetLittleEndian(length_bytes, 8);
    if (length > bytes.size() - at - 12 || bytes.size() - at - 12 - length < 4) {
      Bad(at, "truncated data (length " + std::to_string(length) + ")");
    }
    const std::string_view data = bytes.substr(at + 12, length);
    if (GetLittleEndian(bytes.substr(at + 12 + length, 4), 4) != MaskCrc32c(Crc32c(data))) {
      Bad(at, "the data's CRC does not match");
    }
    records.emplace_back(data);
    at += 16 + length;
  }
  return records;
}

}  // namespace mxrun::trainer
