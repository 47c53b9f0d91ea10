#pragma once
// TFRecord framing, the container of TensorBoard's event files. Each record is
//   uint64 length | uint32 masked CRC-32C of those 8 bytes | data | uint32 masked CRC-32C of data
// with integers little-endian.

#include <string>
#include <string_view>
#include <vector>

namespace mxrun::trainer {

std::string FrameRecord(std::string_view data);

// Splits a file's bytes back into the records' data, checking every length and CRC. Throws
// std::runtime_error naming the byte offset of a truncated record or a CRC mismatch.
std::vector<std::string> ParseRecords(std::string_view bytes);

}  // namespace mxrun::trainer
