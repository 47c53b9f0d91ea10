#pragma once
// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), the checksum of TFRecord framing, and
// TFRecord's masking of it. Slicing by one byte over a table: an event file is a few KiB a
// minute, so a faster variant would buy nothing.

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace mxrun::trainer {

std::uint32_t Crc32c(std::string_view bytes);

// TFRecord stores a CRC rotated right by 15 bits plus a constant, so that a CRC of data that
// itself holds CRCs stays well distributed.
std::uint32_t MaskCrc32c(std::uint32_t crc);

}  // namespace mxrun::trainer
