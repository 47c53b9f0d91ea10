#pragma once
// The rendezvous token: the shared secret every agent presents and the master requires. Read from a
// token file when one is named (--rdzv_conf token_file=, mxrun-master --token_file=), else from
// MXRUN_RDZV_TOKEN; surrounding whitespace is dropped.

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "common/env_contract.h"
#include "common/files.h"

namespace mxrun {

// Empty when no file is named and MXRUN_RDZV_TOKEN is unset (no token). Errors: InvalidArgument
// "cannot be read" or "the file is empty", for the caller to put after its flag and the path.
inline absl::StatusOr<std::string> ReadRendezvousToken(const std::string& token_file,
                                                       const EnvMap& env) {
  if (token_file.empty()) {
    auto it = env.find("MXRUN_RDZV_TOKEN");
    return it == env.end() ? std::string() : std::string(absl::StripAsciiWhitespace(it->second));
  }
  std::optional<std::string> text = ReadWholeFile(token_file);
  if (!text) return absl::InvalidArgumentError("cannot be read");
  std::string token(absl::StripAsciiWhitespace(*text));
  if (token.empty()) return absl::InvalidArgumentError("the file is empty");
  return token;
}

}  // namespace mxrun
