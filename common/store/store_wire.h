#pragma once
// The wire format of PyTorch's TCPStore (2.13, 2.14 and 2.15 clients: the same bytes), decoded and
// encoded with no sockets and no state: the workers' store that the agent serves
// (common/store/store_server.h) reads requests with DecodeStoreRequest and answers with the
// Append* encoders. Read from PyTorch's own client (torch/csrc/distributed/c10d/TCPStore.cpp) and
// its libuv server (TCPStoreLibUvBackend.cpp), the server every 2.x client is tested against.
//
// A request is one byte, the operation (StoreOp, the order of c10d's QueryType), and its fields;
// nothing frames it. Strings and values are a u64 length and the bytes; counts are 8 bytes; ADD's
// delta and BARRIER's world size are i64; VALIDATE's magic and PING's nonce are u32. Integers in
// native byte order (little-endian on every machine PyTorch ships for). Replies carry no header:
// the client knows what to read from what it sent. There is no error reply: a request the server
// cannot take closes the connection.
//
//   op           request fields                     reply
//   VALIDATE     u32 magic (0x3C85F7CE)              none; must be a connection's first request
//   SET          key, value                          none
//   COMPARE_SET  key, expected, desired              value
//   GET          key                                 value (empty when missing)
//   ADD          key, i64 delta                      i64 the new value
//   CHECK        u64 n, n keys                       u8 READY 0 / NOT_READY 1
//   WAIT         u64 n, n keys                       u8 STOP_WAITING 0, when every key is there
//   GETNUMKEYS   -                                   i64
//   DELETE_KEY   key                                 i64 keys deleted (0 or 1)
//   APPEND       key, value                          none
//   MULTI_GET    u64 n, n keys                       n values
//   MULTI_SET    u64 n, n (key, value)               none
//   CANCEL_WAIT  -                                   u8 WAIT_CANCELED 1
//   PING         u32 nonce                           u32 the nonce
//   QUEUE_PUSH   key, value                          none
//   QUEUE_POP    key                                 i64 length before; then the value if > 0
//   QUEUE_LEN    key                                 i64
//   LIST_KEYS    -                                   i64 n, n keys
//   BARRIER      key, i64 world size                 u8 STOP_WAITING 0, when world size arrived
//
// A client's request may arrive split anywhere (it flushes every 1440 bytes) and several may
// arrive together (SET and APPEND have no reply, so the next request follows at once): the
// decoder takes whatever bytes have arrived and says whether they hold a whole request.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace mxrun {

enum class StoreOp : std::uint8_t {
  kValidate = 0,
  kSet,
  kCompareSet,
  kGet,
  kAdd,
  kCheck,
  kWait,
  kNumKeys,
  kDeleteKey,
  kAppend,
  kMultiGet,
  kMultiSet,
  kCancelWait,
  kPing,
  kQueuePush,
  kQueuePop,
  kQueueLen,
  kListKeys,
  kBarrier,
};
inline constexpr std::uint8_t kStoreOpCount = 19;
inline constexpr std::uint32_t kStoreValidationMagic = 0x3C85F7CE;
// CHECK's reply, and WAIT's / CANCEL_WAIT's.
inline constexpr std::uint8_t kStoreReady = 0;
inline constexpr std::uint8_t kStoreNotReady = 1;
inline constexpr std::uint8_t kStoreStopWaiting = 0;
inline constexpr std::uint8_t kStoreWaitCanceled = 1;

// What one request may carry: PyTorch's libuv server's own limits, so that what PyTorch's server
// takes this one takes too.
struct StoreWireLimits {
  std::size_t max_key_bytes = 8 * 1024;
  std::size_t max_value_bytes = 8 * 1024 * 1024;
  std::size_t max_keys_per_request = 128 * 1024;  // CHECK, WAIT, MULTI_GET, MULTI_SET
};

struct StoreRequest {
  StoreOp op = StoreOp::kValidate;
  // The keys, in order: one for the single-key operations, n for CHECK, WAIT, MULTI_GET and
  // MULTI_SET (whose values are in `values`, one per key).
  std::vector<std::string> keys;
  // SET, APPEND, QUEUE_PUSH: one value; COMPARE_SET: expected then desired; MULTI_SET: n.
  std::vector<std::string> values;
  std::int64_t number = 0;  // ADD's delta, BARRIER's world size
  std::uint32_t word = 0;   // VALIDATE's magic, PING's nonce
};

struct StoreDecoded {
  enum class Kind {
    kNeedMore,  // no whole request yet: wait until `needed` bytes have arrived
    kRequest,   // `request`, which took the first `consumed` bytes
    kRefused,   // the bytes are no request this server takes: `error` says why; close
  };
  Kind kind = Kind::kNeedMore;
  std::size_t consumed = 0;
  std::size_t needed = 0;
  StoreRequest request;
  std::string error;
};

// Decodes the request at the start of `bytes`. kNeedMore's `needed` is a lower bound on the bytes
// the whole request takes (the fields seen so far say at least that much), so a caller can wait
// for a large value without decoding again at every read.
StoreDecoded DecodeStoreRequest(std::string_view bytes, const StoreWireLimits& limits);

// Encoders, appending to `out`: a reply, or (for tests and the load generator) a request as a
// PyTorch client sends it.
void AppendStoreU8(std::string& out, std::uint8_t value);
void AppendStoreU32(std::string& out, std::uint32_t value);
void AppendStoreI64(std::string& out, std::int64_t value);
void AppendStoreBytes(std::string& out, std::string_view bytes);  // u64 length, the bytes
std::string EncodeStoreRequest(const StoreRequest& request);

// "SET", "MULTI_GET", ...: c10d's names, for logs and metrics.
const char* StoreOpName(StoreOp op);

}  // namespace mxrun
