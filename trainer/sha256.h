#pragma once
// SHA-256 (FIPS 180-4), streaming: the trainer's digest of its final state (state_digest.h), so
// that two runs can be compared bit for bit from their metrics files. In-tree like crc32c.h: the
// trainer-only GPU build has no OpenSSL to link.

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace mxrun::trainer {

class Sha256 {
 public:
  Sha256();
  void Update(const void* data, size_t size);
  void Update(std::string_view text) { Update(text.data(), text.size()); }
  // The digest as 64 lowercase hex digits; the object is spent after it.
  std::string HexDigest();

 private:
  void Block(const uint8_t* block);

  std::array<uint32_t, 8> h_;
  std::array<uint8_t, 64> buffer_{};
  size_t buffered_ = 0;
  uint64_t length_ = 0;  // bytes hashed
};

}  // namespace mxrun::trainer
