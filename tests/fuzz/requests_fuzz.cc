// libFuzzer target: what a peer sends the master, from arbitrary bytes. The input is parsed as an
// agent's stream message (protobuf); a Join goes through the same conversion and validation the
// service uses into a state machine; and the store's operations run with key, value and counter
// text taken from the input, under the same checks the store service makes. Whatever the bytes,
// nothing crashes, reads out of bounds or overflows (the sanitizers watch), and the store keeps
// what it accepted.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "mxrun.pb.h"
#include "rendezvous/grpc/proto_convert.h"
#include "rendezvous/master_server/memory_store.h"
#include "rendezvous/master_state/master_state.h"
#include "rendezvous/wire/validation.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  // 1. The agent's stream message.
  mxrun::v1::AgentMessage message;
  if (message.ParseFromString(bytes)) {
    mxrun::MasterState state;
    const mxrun::MasterState::Time now{};
    switch (message.kind_case()) {
      case mxrun::v1::AgentMessage::kJoin: {
        const mxrun::v1::Join& join = message.join();
        state.Join(now, 1, join.run_id(), mxrun::FromProto(join.node()),
                   mxrun::FromProto(join.job()));
        state.Join(now, 2, join.run_id(), mxrun::FromProto(join.node()),
                   mxrun::FromProto(join.job()));
        break;
      }
      case mxrun::v1::AgentMessage::kFailure:
        state.ReportFailure(now, 1, message.failure().round(),
                            mxrun::FromProto(message.failure().failure()));
        break;
      case mxrun::v1::AgentMessage::kFlightRecords:
        if (mxrun::ValidateFlightRecords(message.flight_records()).ok()) {
          state.OfferFlightRecords(now, 1, mxrun::FromProto(message.flight_records()),
                                   message.flight_records().request());
        }
        break;
      default:
        break;
    }
  }
  // 2. The store: run id, key and value split from the input at its first two NUL bytes.
  const size_t a = bytes.find('\0');
  const size_t b = a == std::string::npos ? std::string::npos : bytes.find('\0', a + 1);
  const std::string run_id = bytes.substr(0, a);
  const std::string key = a == std::string::npos ? "k" : bytes.substr(a + 1, b - a - 1);
  const std::string value = b == std::string::npos ? "" : bytes.substr(b + 1);
  mxrun::MemoryStore store;
  if (mxrun::ValidateRunId(run_id).ok() && mxrun::ValidateKey(key).ok() &&
      mxrun::ValidateValue(value).ok()) {
    if (!store.Set(run_id, key, value).ok()) std::abort();
    if (store.Get(run_id, key) != value) std::abort();         // kept what it accepted
    store.Add(run_id, key, static_cast<int64_t>(size) - 100);  // a counter from any text
    store.CompareSet(run_id, key, value, false, key);
    store.MultiGet(run_id, {key, value});
    store.Delete(run_id, key);
  }
  mxrun::CheckToken(run_id, key);
  return 0;
}
