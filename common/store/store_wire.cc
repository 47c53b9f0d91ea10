#include "common/store/store_wire.h"

#include <cstring>
#include <limits>

namespace mxrun {
namespace {

// Reads fields off the front of the bytes received so far. A field that is not all there marks
// the request incomplete; one past a limit marks it refused. Once either is set, reads do nothing.
class FieldReader {
 public:
  FieldReader(std::string_view bytes, const StoreWireLimits& limits)
      : bytes_(bytes), limits_(limits) {}

  template <typename T>
  T Number() {
    T value{};
    if (!Have(sizeof(T))) return value;
    std::memcpy(&value, bytes_.data() + at_, sizeof(T));
    at_ += sizeof(T);
    return value;
  }

  // A u64 length and that many bytes, at most `limit` of them.
  std::string Bytes(std::size_t limit, const char* what) {
    const std::uint64_t length = Number<std::uint64_t>();
    if (stopped()) return {};
    if (length > limit) {
      Refuse(std::string(what) + " of " + std::to_string(length) + " bytes (at most " +
             std::to_string(limit) + ")");
      return {};
    }
    if (!Have(static_cast<std::size_t>(length))) return {};
    std::string value(bytes_.substr(at_, static_cast<std::size_t>(length)));
    at_ += static_cast<std::size_t>(length);
    return value;
  }
  std::string Key() { return Bytes(limits_.max_key_bytes, "a key"); }
  std::string Value() { return Bytes(limits_.max_value_bytes, "a value"); }

  // A u64 count of keys (CHECK, WAIT, MULTI_GET, MULTI_SET).
  std::size_t Count() {
    const std::uint64_t count = Number<std::uint64_t>();
    if (stopped()) return 0;
    if (count > limits_.max_keys_per_request) {
      Refuse(std::to_string(count) + " keys in one request (at most " +
             std::to_string(limits_.max_keys_per_request) + ")");
      return 0;
    }
    return static_cast<std::size_t>(count);
  }

  void Refuse(std::string error) {
    if (!stopped()) error_ = std::move(error);
  }
  bool stopped() const { return incomplete_ || !error_.empty(); }
  bool incomplete() const { return incomplete_; }
  const std::string& error() const { return error_; }
  std::size_t at() const { return at_; }
  std::size_t needed() const { return needed_; }

 private:
  bool Have(std::size_t size) {
    if (stopped()) return false;
    if (bytes_.size() - at_ < size) {
      incomplete_ = true;
      // What the fields read so far say the request takes at least.
      needed_ = size > std::numeric_limits<std::size_t>::max() - at_ ? at_ : at_ + size;
      return false;
    }
    return true;
  }

  std::string_view bytes_;
  const StoreWireLimits& limits_;
  std::size_t at_ = 0;
  std::size_t needed_ = 0;
  bool incomplete_ = false;
  std::string error_;
};

}  // namespace

StoreDecoded DecodeStoreRequest(std::string_view bytes, const StoreWireLimits& limits) {
  StoreDecoded decoded;
  if (bytes.empty()) {
    decoded.needed = 1;
    return decoded;
  }
  const auto op_byte = static_cast<std::uint8_t>(bytes[0]);
  if (op_byte >= kStoreOpCount) {
    decoded.kind = StoreDecoded::Kind::kRefused;
    decoded.error = "unknown operation " + std::to_string(op_byte) + " (TCPStore knows 0-" +
                    std::to_string(kStoreOpCount - 1) + ")";
    return decoded;
  }
  StoreRequest& request = decoded.request;
  request.op = static_cast<StoreOp>(op_byte);
  FieldReader reader(bytes.substr(1), limits);
  switch (request.op) {
    case StoreOp::kValidate:
    case StoreOp::kPing:
      request.word = reader.Number<std::uint32_t>();
      break;
    case StoreOp::kSet:
    case StoreOp::kAppend:
    case StoreOp::kQueuePush:
      request.keys.push_back(reader.Key());
      request.values.push_back(reader.Value());
      break;
    case StoreOp::kCompareSet:
      request.keys.push_back(reader.Key());
      request.values.push_back(reader.Value());
      request.values.push_back(reader.Value());
      break;
    case StoreOp::kGet:
    case StoreOp::kDeleteKey:
    case StoreOp::kQueuePop:
    case StoreOp::kQueueLen:
      request.keys.push_back(reader.Key());
      break;
    case StoreOp::kAdd:
    case StoreOp::kBarrier:
      request.keys.push_back(reader.Key());
      request.number = reader.Number<std::int64_t>();
      break;
    case StoreOp::kCheck:
    case StoreOp::kWait:
    case StoreOp::kMultiGet: {
      const std::size_t count = reader.Count();
      for (std::size_t i = 0; i < count && !reader.stopped(); ++i) {
        request.keys.push_back(reader.Key());
      }
      break;
    }
    case StoreOp::kMultiSet: {
      const std::size_t count = reader.Count();
      for (std::size_t i = 0; i < count && !reader.stopped(); ++i) {
        request.keys.push_back(reader.Key());
        request.values.push_back(reader.Value());
      }
      break;
    }
    case StoreOp::kNumKeys:
    case StoreOp::kCancelWait:
    case StoreOp::kListKeys:
      break;
  }
  if (!reader.error().empty()) {
    decoded.kind = StoreDecoded::Kind::kRefused;
    decoded.error = std::string(StoreOpName(request.op)) + ": " + reader.error();
    decoded.request = {};
    return decoded;
  }
  if (reader.incomplete()) {
    decoded.needed = 1 + reader.needed();
    decoded.request = {};
    return decoded;
  }
  decoded.kind = StoreDecoded::Kind::kRequest;
  decoded.consumed = 1 + reader.at();
  return decoded;
}

void AppendStoreU8(std::string& out, std::uint8_t value) {
  out.push_back(static_cast<char>(value));
}

void AppendStoreU32(std::string& out, std::uint32_t value) {
  char raw[sizeof value];
  std::memcpy(raw, &value, sizeof value);
  out.append(raw, sizeof raw);
}

void AppendStoreI64(std::string& out, std::int64_t value) {
  char raw[sizeof value];
  std::memcpy(raw, &value, sizeof value);
  out.append(raw, sizeof raw);
}

void AppendStoreBytes(std::string& out, std::string_view bytes) {
  const std::uint64_t length = bytes.size();
  char raw[sizeof length];
  std::memcpy(raw, &length, sizeof length);
  out.append(raw, sizeof raw);
  out.append(bytes);
}

std::string EncodeStoreRequest(const StoreRequest& request) {
  std::string out;
  AppendStoreU8(out, static_cast<std::uint8_t>(request.op));
  auto key = [&](std::size_t i) {
    AppendStoreBytes(out, i < request.keys.size() ? request.keys[i] : "");
  };
  auto value = [&](std::size_t i) {
    AppendStoreBytes(out, i < request.values.size() ? request.values[i] : "");
  };
  auto count = [&](std::size_t n) { AppendStoreI64(out, static_cast<std::int64_t>(n)); };
  switch (request.op) {
    case StoreOp::kValidate:
    case StoreOp::kPing:
      AppendStoreU32(out, request.word);
      break;
    case StoreOp::kSet:
    case StoreOp::kAppend:
    case StoreOp::kQueuePush:
      key(0);
      value(0);
      break;
    case StoreOp::kCompareSet:
      key(0);
      value(0);
      value(1);
      break;
    case StoreOp::kGet:
    case StoreOp::kDeleteKey:
    case StoreOp::kQueuePop:
    case StoreOp::kQueueLen:
      key(0);
      break;
    case StoreOp::kAdd:
    case StoreOp::kBarrier:
      key(0);
      AppendStoreI64(out, request.number);
      break;
    case StoreOp::kCheck:
    case StoreOp::kWait:
    case StoreOp::kMultiGet:
      count(request.keys.size());
      for (std::size_t i = 0; i < request.keys.size(); ++i) key(i);
      break;
    case StoreOp::kMultiSet:
      count(request.keys.size());
      for (std::size_t i = 0; i < request.keys.size(); ++i) {
        key(i);
        value(i);
      }
      break;
    case StoreOp::kNumKeys:
    case StoreOp::kCancelWait:
    case StoreOp::kListKeys:
      break;
  }
  return out;
}

const char* StoreOpName(StoreOp op) {
  switch (op) {
    case StoreOp::kValidate:
      return "VALIDATE";
    case StoreOp::kSet:
      return "SET";
    case StoreOp::kCompareSet:
      return "COMPARE_SET";
    case StoreOp::kGet:
      return "GET";
    case StoreOp::kAdd:
      return "ADD";
    case StoreOp::kCheck:
      return "CHECK";
    case StoreOp::kWait:
      return "WAIT";
    case StoreOp::kNumKeys:
      return "GETNUMKEYS";
    case StoreOp::kDeleteKey:
      return "DELETE_KEY";
    case StoreOp::kAppend:
      return "APPEND";
    case StoreOp::kMultiGet:
      return "MULTI_GET";
    case StoreOp::kMultiSet:
      return "MULTI_SET";
    case StoreOp::kCancelWait:
      return "CANCEL_WAIT";
    case StoreOp::kPing:
      return "PING";
    case StoreOp::kQueuePush:
      return "QUEUE_PUSH";
    case StoreOp::kQueuePop:
      return "QUEUE_POP";
    case StoreOp::kQueueLen:
      return "QUEUE_LEN";
    case StoreOp::kListKeys:
      return "LIST_KEYS";
    case StoreOp::kBarrier:
      return "BARRIER";
  }
  return "?";
}

}  // namespace mxrun
