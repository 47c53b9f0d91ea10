#include "rendezvous/wire/validation.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace mxrun {

absl::Status ValidateRunId(absl::string_view run_id) {
  bool ok = !run_id.empty() && run_id.size() <= kMaxRunIdLength;
  for (char c : run_id) {
    ok = ok &&
         (absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-');
  }
  if (ok) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "run id '", run_id.substr(0, 64), run_id.size() > 64 ? "...'" : "'",
      " is not valid; accepted: 1 to ", kMaxRunIdLength, " characters of A-Z a-z 0-9 . _ -"));
}

std::string ForeignRunRefusal(absl::string_view served, absl::string_view asked) {
  return absl::StrCat(
      "this rendezvous master belongs to run '", served,
      "' (one of its agents hosts it, and it ends with that job) and serves no other run; run '",
      ValidateRunId(asked).ok() ? asked : absl::string_view("(invalid)"),
      "' must use an endpoint of its own (another --rdzv_endpoint host:port), or an mxrun-master "
      "that serves many runs");
}

absl::Status ValidateKey(absl::string_view key) {
  if (!key.empty() && key.size() <= kMaxKeyLength) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "key of ", key.size(), " bytes is not valid; accepted: 1 to ", kMaxKeyLength, " bytes"));
}

absl::Status ValidateValue(absl::string_view value) {
  if (value.size() <= kMaxValueBytes) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("value of ", value.size(),
                                                 " bytes is too large; accepted: at most ",
                                                 kMaxValueBytes, " bytes"));
}

absl::Status ValidateTopology(absl::string_view topology) {
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat(
        "topology '", topology.substr(0, 64), topology.size() > 64 ? "..." : "",
        "' is not valid: ", why,
        "; accepted: groups of letters, digits and ._:- separated by '/', widest first (e.g. "
        "spine0/leaf3), at most ",
        kMaxTopologyLength, " characters"));
  };
  if (topology.empty()) return absl::OkStatus();
  if (topology.size() > kMaxTopologyLength) return bad("too long");
  bool group_empty = true;
  for (char c : topology) {
    if (c == '/') {
      if (group_empty) return bad("an empty group");
      group_empty = true;
      continue;
    }
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '_' || c == ':' || c == '-';
    if (!ok) return bad(absl::StrCat("the character '", std::string(1, c), "'"));
    group_empty = false;
  }
  if (group_empty) return bad("an empty group");
  return absl::OkStatus();
}

absl::Status CheckToken(absl::string_view expected, absl::string_view presented) {
  if (expected.empty()) return absl::OkStatus();
  unsigned char diff = expected.size() == presented.size() ? 0 : 1;
  for (size_t i = 0; i < expected.size(); ++i) {
    diff |= static_cast<unsigned char>(expected[i] ^ (i < presented.size() ? presented[i] : 0));
  }
  if (diff == 0) return absl::OkStatus();
  return absl::UnauthenticatedError(
      presented.empty()
          ? "the master requires a token: set MXRUN_RDZV_TOKEN or --rdzv_conf "
            "token_file=PATH on every node"
          : "wrong token: the master refused this node's MXRUN_RDZV_TOKEN / token_file");
}

}  // namespace mxrun
