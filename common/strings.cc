#include "common/strings.h"

#include <cstring>

#include "absl/strings/str_replace.h"

namespace mxrun {

std::string SubstituteLocalRank(absl::string_view arg, int local_rank) {
  return absl::StrReplaceAll(arg, {{"${local_rank}", std::to_string(local_rank)}});
}

std::string ErrnoText(int err) {
  char buffer[256];
  // GNU strerror_r returns the message pointer (which may not be `buffer`).
  return std::string(strerror_r(err, buffer, sizeof buffer));
}

}  // namespace mxrun
