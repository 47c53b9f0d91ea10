// The workers' store's wire format (common/store/store_wire): every request PyTorch's TCPStore
// client sends, decoded from the bytes it sends (written out here byte by byte, as the client's
// SendBuffer writes them), whole, split anywhere and run together; what is refused.

#include <cstdint>
#include <string>

#include <catch2/catch.hpp>

#include "common/store/store_wire.h"

using mxrun::DecodeStoreRequest;
using mxrun::EncodeStoreRequest;
using mxrun::StoreDecoded;
using mxrun::StoreOp;
using mxrun::StoreRequest;
using mxrun::StoreWireLimits;

namespace {

std::string U64(std::uint64_t value) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((value >> (8 * i)) & 0xff);
  return out;
}
std::string Str(const std::string& s) { return U64(s.size()) + s; }

}  // namespace

TEST_CASE("the store decodes VALIDATE and PING as a PyTorch client sends them", "[store]") {
  // 00 CE F7 85 3C: VALIDATE and the magic number, little-endian.
  const std::string validate("\x00\xce\xf7\x85\x3c", 5);
  StoreDecoded decoded = DecodeStoreRequest(validate, {});
  REQUIRE(decoded.kind == StoreDecoded::Kind::kRequest);
  CHECK(decoded.request.op == StoreOp::kValidate);
  CHECK(decoded.request.word == mxrun::kStoreValidationMagic);
  CHECK(decoded.consumed == 5);

  const std::string ping("\x0d\x39\x30\x00\x00", 5);  // PING, nonce 12345 (the client's pid)
  decoded = DecodeStoreRequest(ping, {});
  REQUIRE(decoded.kind == StoreDecoded::Kind::kRequest);
  CHECK(decoded.request.op == StoreOp::kPing);
  CHECK(decoded.request.word == 12345);
}

TEST_CASE("the store decodes every operation's fields in the client's order", "[store]") {
  // SET: op 1, key, value.
  StoreDecoded decoded = DecodeStoreRequest("\x01" + Str("/a") + Str("xyz"), {});
  REQUIRE(decoded.kind == StoreDecoded::Kind::kRequest);
  CHECK(decoded.request.op == StoreOp::kSet);
  CHECK(decoded.request.keys == std::vector<std::string>{"/a"});
  CHECK(decoded.request.values == std::vector<std::string>{"xyz"});

  // COMPARE_SET: op 2, key, expected, desired.
  decoded = DecodeStoreRequest("\x02" + Str("/k") + Str("") + Str("new"), {});
  REQUIRE(decoded.kind == StoreDecoded::Kind::kRequest);
  CHECK(decoded.request.values == std::vector<std::string>{"", "new"});

  // ADD: op 4, key, i64 delta (-3).
  decoded = DecodeStoreRequest("\x04" + Str("init/") + U64(static_cast<std::uint64_t>(-3)), {});
  REQUIRE(decoded.kind == StoreDecoded::Kind::kRequest);
  CHECK(decoded.request.op == StoreOp::kAdd);
  CHECK(decoded.request.number == -3);

  // WAIT: op 6, u64 count, the keys.
  decoded = DecodeStoreRequest("\x06" + U64(2) + Str("/x") + Str("/y"), {});
  REQUIRE(decoded.kind == StoreDecoded::Kind::kRequest);
  CHECK(decoded.request.op == StoreOp::kWait);
  CHECK(decoded.request.keys == std::vector<std::string>{"/x", "/y"});

  // MULTI_SET: op 11, count, key/value pairs.
  decoded =
      DecodeStoreRequest("\x0b" + U64(2) + Str("/1") + Str("one") + Str("/2") + Str("two"), {});
  REQUIRE(decoded.kind == StoreDecoded::Kind::kRequest);
  CHECK(decoded.request.keys == std::vector<std::string>{"/1", "/2"});
  CHECK(decoded.request.values == std::vector<std::string>{"one", "two"});

  // BARRIER: op 18, key, i64 world size.
  decoded = DecodeStoreRequest("\x12" + Str("/b") + U64(16384), {});
  REQUIRE(decoded.kind == StoreDecoded::Kind::kRequest);
  CHECK(decoded.request.op == StoreOp::kBarrier);
  CHECK(decoded.request.number == 16384);

  // The operations with no fields.
  for (char op : {'\x07', '\x0c', '\x11'}) {
    decoded = DecodeStoreRequest(std::string(1, op), {});
    REQUIRE(decoded.kind == StoreDecoded::Kind::kRequest);
    CHECK(decoded.consumed == 1);
  }
}

TEST_CASE("every operation's encoding decodes to the same request", "[store]") {
  for (std::uint8_t op = 0; op < mxrun::kStoreOpCount; ++op) {
    StoreRequest request;
    request.op = static_cast<StoreOp>(op);
    switch (request.op) {
      case StoreOp::kValidate:
      case StoreOp::kPing:
        request.word = 77;
        break;
      case StoreOp::kSet:
      case StoreOp::kAppend:
      case StoreOp::kQueuePush:
        request.keys = {"/k"};
        request.values = {std::string("v\0v", 3)};
        break;
      case StoreOp::kCompareSet:
        request.keys = {"/k"};
        request.values = {"e", "d"};
        break;
      case StoreOp::kGet:
      case StoreOp::kDeleteKey:
      case StoreOp::kQueuePop:
      case StoreOp::kQueueLen:
        request.keys = {"/k"};
        break;
      case StoreOp::kAdd:
      case StoreOp::kBarrier:
        request.keys = {"/k"};
        request.number = -9;
        break;
      case StoreOp::kCheck:
      case StoreOp::kWait:
      case StoreOp::kMultiGet:
        request.keys = {"/a", "/b", ""};
        break;
      case StoreOp::kMultiSet:
        request.keys = {"/a", "/b"};
        request.values = {"1", ""};
        break;
      default:
        break;
    }
    const std::string bytes = EncodeStoreRequest(request);
    const StoreDecoded decoded = DecodeStoreRequest(bytes, {});
    INFO(mxrun::StoreOpName(request.op));
    REQUIRE(decoded.kind == StoreDecoded::Kind::kRequest);
    CHECK(decoded.consumed == bytes.size());
    CHECK(decoded.request.keys == request.keys);
    CHECK(decoded.request.values == request.values);
    CHECK(decoded.request.number == request.number);
    CHECK(decoded.request.word == request.word);
  }
}

TEST_CASE(
    "a request split anywhere is incomplete until its last byte, and run-together requests "
    "decode one at a time",
    "[store]") {
  const std::string set = "\x01" + Str("/key") + Str("a value of some length");
  const std::string get = "\x03" + Str("/key");
  for (std::size_t cut = 0; cut < set.size(); ++cut) {
    const StoreDecoded partial = DecodeStoreRequest(set.substr(0, cut), {});
    INFO("cut at " << cut);
    REQUIRE(partial.kind == StoreDecoded::Kind::kNeedMore);
    CHECK(partial.needed > cut);
    CHECK(partial.needed <= set.size());
  }
  const std::string both = set + get;
  const StoreDecoded first = DecodeStoreRequest(both, {});
  REQUIRE(first.kind == StoreDecoded::Kind::kRequest);
  CHECK(first.consumed == set.size());
  const StoreDecoded second = DecodeStoreRequest(std::string_view(both).substr(first.consumed), {});
  REQUIRE(second.kind == StoreDecoded::Kind::kRequest);
  CHECK(second.request.op == StoreOp::kGet);
}

TEST_CASE("a value's length says how many bytes to wait for before decoding again", "[store]") {
  const std::string head = "\x01" + Str("/big") + U64(5'000'000);
  const StoreDecoded partial = DecodeStoreRequest(head + "abc", {});
  REQUIRE(partial.kind == StoreDecoded::Kind::kNeedMore);
  CHECK(partial.needed == head.size() + 5'000'000);
}

TEST_CASE("the store refuses unknown operations and fields past PyTorch's own limits", "[store]") {
  StoreDecoded decoded = DecodeStoreRequest("\x13", {});
  REQUIRE(decoded.kind == StoreDecoded::Kind::kRefused);
  CHECK(decoded.error == "unknown operation 19 (TCPStore knows 0-18)");

  StoreWireLimits limits;
  decoded = DecodeStoreRequest("\x03" + U64(limits.max_key_bytes + 1), limits);
  REQUIRE(decoded.kind == StoreDecoded::Kind::kRefused);
  CHECK(decoded.error == "GET: a key of 8193 bytes (at most 8192)");

  decoded = DecodeStoreRequest("\x01" + Str("/k") + U64(limits.max_value_bytes + 1), limits);
  REQUIRE(decoded.kind == StoreDecoded::Kind::kRefused);
  CHECK(decoded.error == "SET: a value of 8388609 bytes (at most 8388608)");

  decoded = DecodeStoreRequest("\x06" + U64(limits.max_keys_per_request + 1), limits);
  REQUIRE(decoded.kind == StoreDecoded::Kind::kRefused);
  CHECK(decoded.error == "WAIT: 131073 keys in one request (at most 131072)");

  // A length near 2^64 is refused, not added to an offset.
  decoded = DecodeStoreRequest("\x01" + Str("/k") + U64(~std::uint64_t{0}), limits);
  CHECK(decoded.kind == StoreDecoded::Kind::kRefused);
}
