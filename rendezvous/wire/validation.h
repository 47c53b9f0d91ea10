#pragma once
// Checks shared by every master RPC: the run id's shape, sizes, and the shared token.
// Each returns InvalidArgument (or Unauthenticated) with a message saying what is accepted.

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace mxrun {

inline constexpr size_t kMaxRunIdLength = 128;
inline constexpr size_t kMaxKeyLength = 1024;
inline constexpr size_t kMaxValueBytes = 1 << 20;  // 1 MiB per value
inline constexpr size_t kMaxKeysPerRun = 100000;
inline constexpr size_t kMaxHostLength = 255;
inline constexpr int kMaxNodes = 65536;
inline constexpr int kMaxLocalWorldSize = 4096;
inline constexpr const char* kTokenMetadataKey = "x-mxrun-token";
inline constexpr size_t kMaxTopologyLength = 256;

// [A-Za-z0-9._-]{1,128}
absl::Status ValidateRunId(absl::string_view run_id);
absl::Status ValidateKey(absl::string_view key);
absl::Status ValidateValue(absl::string_view value);
// A node's place in the network (NodeDesc::topology): empty, or '/'-separated groups, each of
// [A-Za-z0-9._:-], at most kMaxTopologyLength characters in all.
absl::Status ValidateTopology(absl::string_view topology);

// What a master that serves run `served` only (an agent hosts it) says to a request for run
// `asked`: the message agents print (rendezvous_service.h, store_service.h).
std::string ForeignRunRefusal(absl::string_view served, absl::string_view asked);

// `expected` empty: no token required. Otherwise `presented` must equal it (constant-time compare).
absl::Status CheckToken(absl::string_view expected, absl::string_view presented);

}  // namespace mxrun
