// The workers' store's state (common/store/store_state): what each request answers and whom it
// wakes, as PyTorch's libuv TCPStore server does, and the bounds that keep one client from
// exhausting the store or piling up waiters. No sockets: requests in, replies out.

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "common/store/store_state.h"

using mxrun::StoreClientId;
using mxrun::StoreOp;
using mxrun::StoreOutput;
using mxrun::StoreRequest;
using mxrun::StoreState;

namespace {

std::string I64(std::int64_t value) {
  std::string out(8, '\0');
  std::memcpy(out.data(), &value, 8);
  return out;
}
std::string Bytes(const std::string& value) {
  return I64(static_cast<std::int64_t>(value.size())) + value;
}
const std::string kStop(1, '\0');      // STOP_WAITING
const std::string kCanceled(1, '\1');  // WAIT_CANCELED

// A store with validated clients, driven one request at a time.
struct Scenario {
  StoreState state;
  explicit Scenario(mxrun::StoreStateLimits limits = {}) : state(limits) {}

  void Connect(StoreClientId client) {
    state.Connect(client);
    StoreRequest validate;
    validate.op = StoreOp::kValidate;
    validate.word = mxrun::kStoreValidationMagic;
    REQUIRE(Apply(client, validate).empty());
  }
  std::vector<StoreOutput> Apply(StoreClientId client, const StoreRequest& request) {
    std::vector<StoreOutput> out;
    const absl::Status status = state.Apply(client, request, out);
    INFO(status.ToString());
    REQUIRE(status.ok());
    return out;
  }
  absl::Status Refused(StoreClientId client, const StoreRequest& request) {
    std::vector<StoreOutput> out;
    return state.Apply(client, request, out);
  }
  // The reply to `client` alone (and nothing for anyone else).
  std::string Reply(StoreClientId client, const StoreRequest& request) {
    const auto out = Apply(client, request);
    REQUIRE(out.size() == 1);
    REQUIRE(out[0].client == client);
    return out[0].bytes;
  }
};

StoreRequest Op(StoreOp op, std::vector<std::string> keys = {},
                std::vector<std::string> values = {}, std::int64_t number = 0) {
  StoreRequest request;
  request.op = op;
  request.keys = std::move(keys);
  request.values = std::move(values);
  request.number = number;
  return request;
}

}  // namespace

TEST_CASE("the store takes a client only after VALIDATE with the magic number, once", "[store]") {
  StoreState state;
  std::vector<StoreOutput> out;
  state.Connect(1);
  absl::Status status = state.Apply(1, Op(StoreOp::kGet, {"/a"}), out);
  CHECK(status.message() == "the first request was GET, not VALIDATE (not a TCPStore client?)");
  state.Connect(2);
  StoreRequest validate = Op(StoreOp::kValidate);
  validate.word = 0x12345678;
  status = state.Apply(2, validate, out);
  CHECK(status.message() == "VALIDATE with magic number 305419896, not 1015412686");
  validate.word = mxrun::kStoreValidationMagic;
  state.Connect(3);
  REQUIRE(state.Apply(3, validate, out).ok());
  CHECK(state.Apply(3, validate, out).message() == "a second VALIDATE");
  CHECK(out.empty());
}

TEST_CASE("the store answers each operation as PyTorch's server does", "[store]") {
  Scenario s;
  s.Connect(1);
  StoreRequest ping = Op(StoreOp::kPing);
  ping.word = 4242;
  CHECK(s.Reply(1, ping) == std::string("\x92\x10\0\0", 4));

  CHECK(s.Apply(1, Op(StoreOp::kSet, {"/a"}, {"value"})).empty());
  CHECK(s.Reply(1, Op(StoreOp::kGet, {"/a"})) == Bytes("value"));
  CHECK(s.Reply(1, Op(StoreOp::kGet, {"/missing"})) == Bytes(""));

  CHECK(s.Reply(1, Op(StoreOp::kAdd, {"/n"}, {}, 5)) == I64(5));
  CHECK(s.Reply(1, Op(StoreOp::kAdd, {"/n"}, {}, -7)) == I64(-2));
  CHECK(s.Reply(1, Op(StoreOp::kGet, {"/n"})) == Bytes("-2"));

  CHECK(s.Reply(1, Op(StoreOp::kCheck, {"/a", "/n"})) == std::string(1, '\0'));
  CHECK(s.Reply(1, Op(StoreOp::kCheck, {"/a", "/nope"})) == std::string(1, '\1'));

  CHECK(s.Reply(1, Op(StoreOp::kCompareSet, {"/cs"}, {"", "first"})) == Bytes("first"));
  CHECK(s.Reply(1, Op(StoreOp::kCompareSet, {"/cs"}, {"wrong", "x"})) == Bytes("first"));
  CHECK(s.Reply(1, Op(StoreOp::kCompareSet, {"/cs"}, {"first", "second"})) == Bytes("second"));
  CHECK(s.Reply(1, Op(StoreOp::kCompareSet, {"/gone"}, {"exp", "x"})) == Bytes("exp"));
  CHECK(s.Reply(1, Op(StoreOp::kCheck, {"/gone"})) == std::string(1, '\1'));

  CHECK(s.Apply(1, Op(StoreOp::kAppend, {"/ap"}, {"x"})).empty());
  CHECK(s.Apply(1, Op(StoreOp::kAppend, {"/ap"}, {"yz"})).empty());
  CHECK(s.Reply(1, Op(StoreOp::kGet, {"/ap"})) == Bytes("xyz"));

  CHECK(s.Apply(1, Op(StoreOp::kMultiSet, {"/m1", "/m2"}, {"one", "two"})).empty());
  CHECK(s.Reply(1, Op(StoreOp::kMultiGet, {"/m2", "/nope", "/m1"})) ==
        Bytes("two") + Bytes("") + Bytes("one"));

  // /a /n /cs /ap /m1 /m2
  CHECK(s.Reply(1, Op(StoreOp::kNumKeys)) == I64(6));
  const std::string listed = s.Reply(1, Op(StoreOp::kListKeys));
  CHECK(listed.substr(0, 8) == I64(6));
  CHECK(listed.size() == 8 + 6 * 8 + std::string("/a/n/cs/ap/m1/m2").size());
  CHECK(s.Reply(1, Op(StoreOp::kDeleteKey, {"/m1"})) == I64(1));
  CHECK(s.Reply(1, Op(StoreOp::kDeleteKey, {"/m1"})) == I64(0));
  CHECK(s.Reply(1, Op(StoreOp::kNumKeys)) == I64(5));
}

TEST_CASE("the store's queues: push, length, pop, empty", "[store]") {
  Scenario s;
  s.Connect(1);
  s.Apply(1, Op(StoreOp::kQueuePush, {"/q"}, {"first"}));
  s.Apply(1, Op(StoreOp::kQueuePush, {"/q"}, {"second"}));
  CHECK(s.Reply(1, Op(StoreOp::kQueueLen, {"/q"})) == I64(2));
  CHECK(s.Reply(1, Op(StoreOp::kCheck, {"/q"})) == std::string(1, '\0'));  // a queue with items
  CHECK(s.Reply(1, Op(StoreOp::kQueuePop, {"/q"})) == I64(2) + Bytes("first"));
  CHECK(s.Reply(1, Op(StoreOp::kQueuePop, {"/q"})) == I64(1) + Bytes("second"));
  CHECK(s.Reply(1, Op(StoreOp::kQueuePop, {"/q"})) == I64(0));
  CHECK(s.Reply(1, Op(StoreOp::kQueueLen, {"/q"})) == I64(0));
  CHECK(s.state.Counts().bytes == 0);  // everything pushed was given back
}

TEST_CASE("a wait is answered once every key it waits for is set, whoever sets it", "[store]") {
  Scenario s;
  s.Connect(1);
  s.Connect(2);
  s.Connect(3);
  s.Apply(1, Op(StoreOp::kSet, {"/a"}, {"1"}));
  CHECK(s.Reply(2, Op(StoreOp::kWait, {"/a"})) == kStop);  // there already: at once
  CHECK(s.Apply(2, Op(StoreOp::kWait, {"/a", "/b", "/c"})).empty());
  CHECK(s.Apply(3, Op(StoreOp::kWait, {"/c"})).empty());
  CHECK(s.state.Counts().waiting_clients == 2);
  CHECK(s.Apply(1, Op(StoreOp::kSet, {"/b"}, {"1"})).empty());  // 2 still waits for /c
  const auto woken = s.Apply(1, Op(StoreOp::kAdd, {"/c"}, {}, 1));
  // ADD's reply to its sender, then STOP_WAITING for both waiters, in the order they asked.
  REQUIRE(woken.size() == 3);
  CHECK(woken[0].client == 1);
  CHECK(woken[1].client == 2);
  CHECK(woken[1].bytes == kStop);
  CHECK(woken[2].client == 3);
  CHECK(s.state.Counts().waiting_clients == 0);
}

TEST_CASE("APPEND, MULTI_SET and COMPARE_SET wake waiters too, on every path", "[store]") {
  Scenario s;
  s.Connect(1);
  s.Connect(2);
  s.Apply(2, Op(StoreOp::kWait, {"/x"}));
  REQUIRE(s.Apply(1, Op(StoreOp::kAppend, {"/x"}, {"."})).size() == 1);
  s.Apply(2, Op(StoreOp::kWait, {"/y"}));
  REQUIRE(s.Apply(1, Op(StoreOp::kMultiSet, {"/z", "/y"}, {"", ""})).size() == 1);
  s.Apply(2, Op(StoreOp::kWait, {"/cs"}));
  // A missing key and a non-empty expected value stores nothing, yet wakes (libuv does).
  CHECK(s.Apply(1, Op(StoreOp::kCompareSet, {"/cs"}, {"e", "d"})).size() == 2);
}

TEST_CASE("CANCEL_WAIT ends a wait: WAIT_CANCELED, and no STOP_WAITING after it", "[store]") {
  Scenario s;
  s.Connect(1);
  s.Connect(2);
  s.Apply(2, Op(StoreOp::kWait, {"/late"}));
  CHECK(s.Reply(2, Op(StoreOp::kCancelWait)) == kCanceled);
  CHECK(s.Apply(1, Op(StoreOp::kSet, {"/late"}, {"1"})).empty());  // nobody to wake
  CHECK(s.Reply(2, Op(StoreOp::kCancelWait)) == kCanceled);        // answered with none pending
  CHECK(s.Reply(2, Op(StoreOp::kGet, {"/late"})) == Bytes("1"));   // and it works on
}

TEST_CASE("a client has one wait at a time: a second request while it waits breaks the protocol",
          "[store]") {
  Scenario s;
  s.Connect(1);
  s.Apply(1, Op(StoreOp::kWait, {"/a"}));
  CHECK(s.Refused(1, Op(StoreOp::kWait, {"/b"})).message() ==
        "WAIT while its previous wait is pending");
  CHECK(s.Refused(1, Op(StoreOp::kSet, {"/b"}, {""})).message() == "SET while its wait is pending");
}

TEST_CASE("clients that time out again and again on a key nobody sets leave no growing list",
          "[store]") {
  Scenario s;
  for (StoreClientId client = 1; client <= 8; ++client) s.Connect(client);
  // c10d's store barrier: WAIT, a timeout, CANCEL_WAIT, and again, for as long as a rank is late.
  for (int cycle = 0; cycle < 10000; ++cycle) {
    const StoreClientId client = 1 + cycle % 8;
    s.Apply(client, Op(StoreOp::kWait, {"/last_worker"}));
    s.Apply(client, Op(StoreOp::kCancelWait));
  }
  CHECK(s.state.Counts().waiting_clients == 0);
  // The list was compacted as it went: one SET finds at most a handful of stale entries.
  s.Apply(1, Op(StoreOp::kWait, {"/last_worker"}));
  const auto woken = s.Apply(2, Op(StoreOp::kSet, {"/last_worker"}, {"1"}));
  REQUIRE(woken.size() == 1);
  CHECK(woken[0].client == 1);
}

TEST_CASE("a client that goes while it waits is forgotten, what it set stays", "[store]") {
  Scenario s;
  s.Connect(1);
  s.Connect(2);
  s.Apply(1, Op(StoreOp::kSet, {"/mine"}, {"1"}));
  s.Apply(1, Op(StoreOp::kWait, {"/go"}));
  s.state.Disconnect(1);
  CHECK(s.state.Counts().waiting_clients == 0);
  CHECK(s.Apply(2, Op(StoreOp::kSet, {"/go"}, {"1"})).empty());  // nothing for the gone client
  CHECK(s.Reply(2, Op(StoreOp::kGet, {"/mine"})) == Bytes("1"));
}

TEST_CASE("BARRIER: the last of world-size arrivals releases everyone, the count is a key",
          "[store]") {
  Scenario s;
  for (StoreClientId client = 1; client <= 3; ++client) s.Connect(client);
  CHECK(s.Apply(1, Op(StoreOp::kBarrier, {"/b"}, {}, 3)).empty());
  CHECK(s.Apply(2, Op(StoreOp::kBarrier, {"/b"}, {}, 3)).empty());
  const auto released = s.Apply(3, Op(StoreOp::kBarrier, {"/b"}, {}, 3));
  REQUIRE(released.size() == 3);
  CHECK(released[0].client == 1);
  CHECK(released[1].client == 2);
  CHECK(released[2].client == 3);
  CHECK(s.Reply(1, Op(StoreOp::kGet, {"/b"})) == Bytes("3"));
  // As in c10d, the count is never reset: the same key again passes at once.
  CHECK(s.Reply(1, Op(StoreOp::kBarrier, {"/b"}, {}, 3)) == kStop);
}

TEST_CASE("QUEUE_PUSH wakes one waiter, the first that asked", "[store]") {
  Scenario s;
  for (StoreClientId client = 1; client <= 3; ++client) s.Connect(client);
  s.Apply(1, Op(StoreOp::kWait, {"/q"}));
  s.Apply(2, Op(StoreOp::kWait, {"/q"}));
  const auto woken = s.Apply(3, Op(StoreOp::kQueuePush, {"/q"}, {"item"}));
  REQUIRE(woken.size() == 1);
  CHECK(woken[0].client == 1);
  CHECK(s.state.Counts().waiting_clients == 1);
  CHECK(s.Apply(3, Op(StoreOp::kQueuePush, {"/q"}, {"item"})).size() == 1);
}

TEST_CASE("ADD refuses a key that holds no number, and an overflow", "[store]") {
  Scenario s;
  s.Connect(1);
  s.Apply(1, Op(StoreOp::kSet, {"/text"}, {"not a number"}));
  CHECK(s.Refused(1, Op(StoreOp::kAdd, {"/text"}, {}, 1)).message() ==
        "key '/text' holds no 64-bit integer to add to");
  s.Apply(1, Op(StoreOp::kSet, {"/max"}, {"9223372036854775807"}));
  CHECK(s.Refused(1, Op(StoreOp::kAdd, {"/max"}, {}, 1)).message() ==
        "ADD of 1 to '/max' (9223372036854775807) overflows 64 bits");
  // c10d's stoll reads a leading number and ignores the rest.
  s.Apply(1, Op(StoreOp::kSet, {"/lead"}, {" 12abc"}));
  CHECK(s.Reply(1, Op(StoreOp::kAdd, {"/lead"}, {}, 1)) == I64(13));
}

TEST_CASE("the store's bytes stay under max_bytes: a write past it is refused, the store unchanged",
          "[store]") {
  mxrun::StoreStateLimits limits;
  limits.max_bytes = 4096;
  Scenario s(limits);
  s.Connect(1);
  s.Apply(1, Op(StoreOp::kSet, {"/a"}, {std::string(2000, 'x')}));
  const std::size_t held = s.state.Counts().bytes;
  CHECK(held == 2 + 2000 + mxrun::StoreStateLimits::kEntryOverhead);
  const absl::Status refused = s.Refused(1, Op(StoreOp::kSet, {"/b"}, {std::string(3000, 'y')}));
  CHECK(refused.code() == absl::StatusCode::kResourceExhausted);
  CHECK(refused.message() == "the store would hold 5132 bytes (at most 4096)");
  CHECK(s.state.Counts().bytes == held);
  CHECK(s.Reply(1, Op(StoreOp::kCheck, {"/b"})) == std::string(1, '\1'));
  // Overwriting gives back what the old value held; deleting gives back all.
  s.Apply(1, Op(StoreOp::kSet, {"/a"}, {std::string(3900, 'z')}));
  s.Reply(1, Op(StoreOp::kDeleteKey, {"/a"}));
  CHECK(s.state.Counts().bytes == 0);
  // Many empty keys are bounded too (each counts its overhead).
  int stored = 0;
  for (; stored < 1000; ++stored) {
    if (!s.Refused(1, Op(StoreOp::kSet, {"/" + std::to_string(stored)}, {""})).ok()) break;
  }
  CHECK(stored < 4096 / static_cast<int>(mxrun::StoreStateLimits::kEntryOverhead) + 1);
}

TEST_CASE("a MULTI_GET that names one large value many times is refused, not answered", "[store]") {
  mxrun::StoreStateLimits limits;
  limits.max_reply_bytes = 1 << 20;
  Scenario s(limits);
  s.Connect(1);
  s.Apply(1, Op(StoreOp::kSet, {"/big"}, {std::string(100'000, 'x')}));
  CHECK(s.Reply(1, Op(StoreOp::kMultiGet, std::vector<std::string>(10, "/big"))).size() ==
        10 * (8 + 100'000));
  const absl::Status refused =
      s.Refused(1, Op(StoreOp::kMultiGet, std::vector<std::string>(11, "/big")));
  CHECK(refused.message() == "MULTI_GET of 11 keys would answer 1100088 bytes (at most 1048576)");
}
