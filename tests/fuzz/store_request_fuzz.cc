// libFuzzer target: the workers' store (common/store) on arbitrary bytes, as its server takes them:
// the first byte picks how many clients share the store (1-4) and each later run of requests goes
// to the next client, decoded as they arrive and applied to one state. Invariants after every
// input, not only "no crash": a decoded request takes no more bytes than it was given and encodes
// back to the same bytes; an incomplete one asks for more than it has; the store's bytes stay
// within its bound; a refused request leaves its client to be closed, as the server does, and the
// other clients are served on; every client that has a wait pending is counted as waiting.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "common/store/store_state.h"
#include "common/store/store_wire.h"

namespace {

void Check(bool holds) {
  if (!holds) std::abort();  // an invariant broken: libFuzzer keeps the input
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const int clients = 1 + data[0] % 4;
  std::string_view bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
  mxrun::StoreWireLimits wire;
  wire.max_key_bytes = 64;
  wire.max_value_bytes = 1024;
  wire.max_keys_per_request = 16;
  mxrun::StoreStateLimits limits;
  limits.max_bytes = 8192;
  mxrun::StoreState state(limits);
  std::set<mxrun::StoreClientId> open;
  for (int c = 1; c <= clients; ++c) {
    state.Connect(c);
    open.insert(c);
    // Most inputs start validated, so that the fuzzer reaches the operations.
    if (c % 2 == 1) {
      mxrun::StoreRequest validate;
      validate.op = mxrun::StoreOp::kValidate;
      validate.word = mxrun::kStoreValidationMagic;
      std::vector<mxrun::StoreOutput> out;
      Check(state.Apply(c, validate, out).ok() && out.empty());
    }
  }
  std::vector<mxrun::StoreOutput> out;
  mxrun::StoreClientId client = 1;
  while (!bytes.empty() && !open.empty()) {
    const mxrun::StoreDecoded decoded = mxrun::DecodeStoreRequest(bytes, wire);
    if (decoded.kind == mxrun::StoreDecoded::Kind::kNeedMore) {
      Check(decoded.needed > bytes.size());
      break;
    }
    if (decoded.kind == mxrun::StoreDecoded::Kind::kRefused) {
      Check(!decoded.error.empty());
      break;
    }
    Check(decoded.consumed > 0 && decoded.consumed <= bytes.size());
    // The request encodes back to the bytes it came from (MULTI_SET's count aside: the client
    // writes it as i64, read back as u64, the same 8 bytes).
    Check(mxrun::EncodeStoreRequest(decoded.request) == bytes.substr(0, decoded.consumed));
    bytes.remove_prefix(decoded.consumed);
    if (open.count(client) != 0) {
      out.clear();
      const absl::Status applied = state.Apply(client, decoded.request, out);
      if (!applied.ok()) {
        Check(!applied.message().empty());
        state.Disconnect(client);  // what the server does with a client that broke the rules
        open.erase(client);
      }
      for (const mxrun::StoreOutput& each : out) {
        Check(!each.bytes.empty());
        Check(open.count(each.client) != 0);  // nothing for a client that is gone
      }
    }
    const mxrun::StoreCounts counts = state.Counts();
    Check(counts.bytes <= limits.max_bytes);
    Check(counts.clients == open.size());
    Check(counts.waiting_clients <= counts.clients);
    client = 1 + client % clients;
  }
  return 0;
}
