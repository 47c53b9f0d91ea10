#pragma once
// What the workers' store holds and decides, with no sockets: the keys and their values, the
// queues, the clients waiting on keys (WAIT, BARRIER, and GET's wait before it), and the replies
// each decoded request (common/store/store_wire.h) produces, for the client that sent it and for
// the waiters it wakes. The semantics are those of PyTorch's libuv TCPStore server, which every
// 2.x client is tested against:
//
// - A connection's first request is VALIDATE with the magic number; anything else, or a VALIDATE
//   later, breaks the protocol.
// - SET, MULTI_SET, APPEND, ADD, COMPARE_SET (on every path, as libuv does) and a BARRIER that
//   completes wake every client waiting on the key; QUEUE_PUSH wakes the first one only (one item,
//   one pop). A waiter is answered STOP_WAITING once every key it waits for has been woken (or was
//   there when it asked: a key is there when it is set or when it names a queue with items).
// - ADD and BARRIER keep decimal text, as c10d does (GET of a counter reads "3").
// - GET and MULTI_GET of a missing key answer an empty value (clients WAIT first); QUEUE_POP never
//   waits (an empty queue answers length 0; clients wait for the key first).
// - CANCEL_WAIT (a client's timeout) ends the client's wait and is always answered WAIT_CANCELED,
//   after any STOP_WAITING already produced: the client reads both.
// - A client has one wait at a time (a c10d client holds one operation in flight); a second
//   breaks the protocol, so a client cannot pile up waiters.
//
// Bounds: the bytes of every key, value and queued item together (each counted with a fixed
// overhead, so that many empty keys are bounded too) stay under StoreStateLimits::max_bytes, and
// one reply under max_reply_bytes; a request that would pass either is refused and the shell
// closes that client, whose PyTorch call then fails. Nothing else is undone when a client goes: its
// keys stay (later ranks read them), its wait is dropped.
//
// Single-threaded: the server calls it from its one thread.

#include <array>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/status/status.h"
#include "common/store/store_wire.h"

namespace mxrun {

using StoreClientId = std::uint64_t;

struct StoreStateLimits {
  // Every key, value and queued item, plus kEntryOverhead each.
  std::size_t max_bytes = std::size_t{1} << 30;
  // One reply: a MULTI_GET that names one large value many times would otherwise build a reply
  // of up to 128K times 8 MiB.
  std::size_t max_reply_bytes = std::size_t{128} << 20;
  static constexpr std::size_t kEntryOverhead = 64;
};

// Bytes for one client: a reply, or STOP_WAITING for a waiter that a request woke.
struct StoreOutput {
  StoreClientId client = 0;
  std::string bytes;
};

struct StoreCounts {
  std::size_t keys = 0;
  std::size_t queues = 0;
  std::size_t bytes = 0;                                // as counted against max_bytes
  std::size_t clients = 0;                              // connected, validated or not
  std::size_t waiting_clients = 0;                      // with a wait or a barrier pending
  std::array<std::uint64_t, kStoreOpCount> requests{};  // by StoreOp
};

class StoreState {
 public:
  explicit StoreState(StoreStateLimits limits = {}) : limits_(limits) {}

  // A new connection, which must VALIDATE first.
  void Connect(StoreClientId client);
  // Applies one request of `client`, appending what it produces to `out`. An error says how the
  // client broke the protocol or a bound; the shell then closes it (the state is as before the
  // request, but for a MULTI_SET's pairs before the one refused).
  absl::Status Apply(StoreClientId client, const StoreRequest& request,
                     std::vector<StoreOutput>& out);
  // The connection closed: its wait is dropped.
  void Disconnect(StoreClientId client);

  StoreCounts Counts() const;

 private:
  struct Client {
    bool validated = false;
    std::size_t keys_awaited = 0;  // > 0 while a WAIT or BARRIER is pending
    std::uint64_t wait = 0;        // which of its waits; a waiter entry of an older one is stale
    std::vector<std::string> awaited;  // the keys of its pending wait's entries
  };
  // One client's entry in a key's list. Entries of a wait that ended without the key (cancelled,
  // disconnected) stay until the key wakes its list, or until they are half of it (then the list
  // is compacted): dropping a client costs O(its keys), not O(every list it is in).
  struct Waiter {
    StoreClientId client = 0;
    std::uint64_t wait = 0;
  };
  struct WaitList {
    std::deque<Waiter> waiters;
    std::size_t stale = 0;
  };

  bool Present(const std::string& key) const;
  bool Current(const Waiter& waiter) const;
  // Registers `client` as waiting for the keys among `keys` that are not there; answers it at
  // once when all are.
  void Wait(StoreClientId client, Client& state, const std::vector<std::string>& keys,
            std::vector<StoreOutput>& out);
  void WakeAll(const std::string& key, std::vector<StoreOutput>& out);
  void WakeOne(const std::string& key, std::vector<StoreOutput>& out);
  void ClearWait(StoreClientId client);
  // Stores `value` under `key`, within max_bytes.
  absl::Status Put(const std::string& key, std::string value);
  absl::Status Charge(std::size_t more, std::size_t less);

  StoreStateLimits limits_;
  std::unordered_map<std::string, std::string> values_;
  std::unordered_map<std::string, std::deque<std::string>> queues_;
  // Clients waiting on a key, in the order they asked.
  std::unordered_map<std::string, WaitList> waiting_;
  std::unordered_map<StoreClientId, Client> clients_;
  std::size_t bytes_ = 0;
  std::array<std::uint64_t, kStoreOpCount> requests_{};
};

}  // namespace mxrun
