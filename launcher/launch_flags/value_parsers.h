#pragma once
// The value syntaxes of mxrun's flags that more than their own group reads (tests, mxrun status).

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "launcher/launch_flags/launch_options.h"

namespace mxrun {

// "N" or "MIN:MAX" with 0 < MIN <= MAX.
absl::StatusOr<NodeRange> ParseNodeRange(absl::string_view text);
// torchrun's comma-separated filter list: ",," stands for a comma; an empty text is no filter. An
// empty item (which would match every line) is an error.
absl::StatusOr<std::vector<std::string>> ParseFilterList(absl::string_view text);
// "k=v,k=v" (empty: none).
absl::StatusOr<std::map<std::string, std::string>> ParseRdzvConf(absl::string_view text);

}  // namespace mxrun
