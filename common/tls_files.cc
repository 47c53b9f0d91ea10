#include "common/tls_files.h"

#include <optional>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/files.h"

namespace mxrun {

absl::Status CheckTlsFiles(const TlsFiles& files, absl::string_view where) {
  if (!files.enabled()) return absl::OkStatus();
  const struct {
    const char* name;
    const std::string& path;
    const char* marker;  // what a PEM file of this kind holds
  } parts[] = {{"cert", files.cert, "CERTIFICATE-----"},
               {"key", files.key, "PRIVATE KEY-----"},
               {"cacert", files.cacert, "CERTIFICATE-----"}};
  for (const auto& part : parts) {
    if (part.path.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": mutual TLS needs cert, key and cacert together; ", part.name,
                       " is missing (accepted: the three PEM files, or none for plaintext)"));
    }
  }
  for (const auto& part : parts) {
    std::optional<std::string> text = ReadWholeFile(part.path);
    if (!text) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": ", part.name, "=", part.path, " cannot be read"));
    }
    if (!absl::StrContains(*text, part.marker)) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": ", part.name, "=", part.path, " is not a PEM file with a ",
                       absl::StrContains(part.marker, "KEY") ? "private key" : "certificate"));
    }
  }
  return absl::OkStatus();
}

}  // namespace mxrun
