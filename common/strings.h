#pragma once
// Small string helpers shared by the launcher and the agent.

#include <string>
#include <string_view>
#include "absl/strings/string_view.h"

namespace mxrun {

// Replaces every "${local_rank}" in `arg` with `local_rank` (torchrun's argument macro).
std::string SubstituteLocalRank(absl::string_view arg, int local_rank);

// The error text of an errno value ("No such file or directory").
std::string ErrnoText(int err);

}  // namespace mxrun
