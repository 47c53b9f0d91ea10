#pragma once
// Signal numbers and their names ("SIGTERM"), as torchrun and the summary print them.

#include <optional>
#include <string>
#include <string_view>
#include "absl/strings/string_view.h"

namespace mxrun {

// "SIGKILL" for 9; "SIG<n>" for numbers without a name (real-time signals and so on).
std::string SignalName(int signo);

// Parses "SIGTERM", "TERM", "sigterm" or "15". nullopt when it names no signal this system has.
std::optional<int> ParseSignal(absl::string_view text);

// "Signal 9 (SIGKILL)": the phrase the failure summary uses for a death by signal.
std::string DescribeSignal(int signo);

}  // namespace mxrun
