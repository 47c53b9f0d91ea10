#pragma once
// One JSON string literal, for the JSON lines mxrun writes (its own log records and the workers'
// console lines with --log_format=json).

#include <string>
#include <string_view>

namespace mxrun {

// `text` quoted and escaped as a JSON string; bytes that are not valid UTF-8 become U+FFFD.
std::string JsonQuote(std::string_view text);

}  // namespace mxrun
