#include "common/repeated_failure.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace mxrun {

std::optional<std::string> FailureSignature(const WorkerFailure& failure) {
  if (failure.term_signal != 0 || failure.hang.hung() || failure.exit_code == 0) {
    return std::nullopt;
  }
  std::string error(absl::StripAsciiWhitespace(failure.message));
  for (auto it = failure.last_lines.rbegin(); error.empty() && it != failure.last_lines.rend();
       ++it) {
    error = std::string(absl::StripAsciiWhitespace(*it));
  }
  if (error.empty()) return std::nullopt;  // nothing to tell one exit from another
  return absl::StrCat("exit code ", failure.exit_code, ": ", error);
}

void RepeatedFailures::Add(const WorkerFailure& failure) {
  ++attempts_;
  const std::optional<std::string> signature = FailureSignature(failure);
  if (!signature) {
    same_ = false;
  } else if (attempts_ == 1) {
    signature_ = *signature;
  } else if (*signature != signature_) {
    same_ = false;
  }
}

}  // namespace mxrun
