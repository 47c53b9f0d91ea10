#include "common/store/store_state.h"

#include <cerrno>
#include <cstdlib>
#include <limits>

#include "absl/strings/str_cat.h"

namespace mxrun {
namespace {

std::string U8(std::uint8_t value) { return std::string(1, static_cast<char>(value)); }

std::string I64(std::int64_t value) {
  std::string out;
  AppendStoreI64(out, value);
  return out;
}

std::string Bytes(std::string_view value) {
  std::string out;
  AppendStoreBytes(out, value);
  return out;
}

// A counter's text as c10d's std::stoll reads it: leading blanks, a sign, digits, and whatever
// follows ignored; no digits or out of range is an error.
absl::Status ParseCounter(const std::string& key, const std::string& text, std::int64_t& value) {
  const std::string terminated(text.c_str());  // strtoll stops at a NUL, as stoll does
  errno = 0;
  char* end = nullptr;
  const long long parsed = std::strtoll(terminated.c_str(), &end, 10);
  if (end == terminated.c_str() || errno == ERANGE) {
    return absl::InvalidArgumentError(
        absl::StrCat("key '", key, "' holds no 64-bit integer to add to"));
  }
  value = parsed;
  return absl::OkStatus();
}

std::size_t EntrySize(const std::string& key, std::size_t value_size) {
  return key.size() + value_size + StoreStateLimits::kEntryOverhead;
}

}  // namespace

void StoreState::Connect(StoreClientId client) { clients_[client] = Client{}; }

void StoreState::Disconnect(StoreClientId client) {
  ClearWait(client);
  clients_.erase(client);
}

bool StoreState::Present(const std::string& key) const {
  if (values_.contains(key)) return true;
  auto queue = queues_.find(key);
  return queue != queues_.end() && !queue->second.empty();
}

bool StoreState::Current(const Waiter& waiter) const {
  auto found = clients_.find(waiter.client);
  return found != clients_.end() && found->second.wait == waiter.wait &&
         found->second.keys_awaited > 0;
}

absl::Status StoreState::Charge(std::size_t more, std::size_t less) {
  const std::size_t after = bytes_ - std::min(less, bytes_) + more;
  if (more > less && after > limits_.max_bytes) {
    return absl::ResourceExhaustedError(
        absl::StrCat("the store would hold ", after, " bytes (at most ", limits_.max_bytes, ")"));
  }
  bytes_ = after;
  return absl::OkStatus();
}

absl::Status StoreState::Put(const std::string& key, std::string value) {
  auto found = values_.find(key);
  const std::size_t less = found == values_.end() ? 0 : EntrySize(key, found->second.size());
  if (absl::Status charged = Charge(EntrySize(key, value.size()), less); !charged.ok()) {
    return charged;
  }
  if (found == values_.end()) {
    values_.emplace(key, std::move(value));
  } else {
    found->second = std::move(value);
  }
  return absl::OkStatus();
}

void StoreState::Wait(StoreClientId client, Client& state, const std::vector<std::string>& keys,
                      std::vector<StoreOutput>& out) {
  ++state.wait;
  state.awaited.clear();
  for (const std::string& key : keys) {
    if (Present(key)) continue;
    waiting_[key].waiters.push_back({client, state.wait});
    state.awaited.push_back(key);
  }
  state.keys_awaited = state.awaited.size();
  if (state.keys_awaited == 0) out.push_back({client, U8(kStoreStopWaiting)});
}

void StoreState::WakeAll(const std::string& key, std::vector<StoreOutput>& out) {
  auto found = waiting_.find(key);
  if (found == waiting_.end()) return;
  const std::deque<Waiter> waiters = std::move(found->second.waiters);
  waiting_.erase(found);
  for (const Waiter& waiter : waiters) {
    if (!Current(waiter)) continue;
    Client& state = clients_[waiter.client];
    if (--state.keys_awaited == 0) {
      state.awaited.clear();
      out.push_back({waiter.client, U8(kStoreStopWaiting)});
    }
  }
}

void StoreState::WakeOne(const std::string& key, std::vector<StoreOutput>& out) {
  auto found = waiting_.find(key);
  if (found == waiting_.end()) return;
  WaitList& list = found->second;
  while (!list.waiters.empty()) {
    const Waiter waiter = list.waiters.front();
    list.waiters.pop_front();
    if (!Current(waiter)) {
      if (list.stale > 0) --list.stale;
      continue;
    }
    Client& state = clients_[waiter.client];
    if (--state.keys_awaited == 0) {
      state.awaited.clear();
      out.push_back({waiter.client, U8(kStoreStopWaiting)});
      break;
    }
  }
  if (list.waiters.empty()) waiting_.erase(found);
}

void StoreState::ClearWait(StoreClientId client) {
  auto found = clients_.find(client);
  if (found == clients_.end() || found->second.keys_awaited == 0) return;
  Client& state = found->second;
  state.keys_awaited = 0;
  ++state.wait;
  for (const std::string& key : state.awaited) {
    auto list = waiting_.find(key);
    if (list == waiting_.end()) continue;
    // Compact a list that is half stale, so that clients that time out again and again on a key
    // nobody sets (c10d's store barrier retries every 10 s) do not grow it without bound.
    if (++list->second.stale * 2 > list->second.waiters.size()) {
      std::deque<Waiter> kept;
      for (const Waiter& waiter : list->second.waiters) {
        if (Current(waiter)) kept.push_back(waiter);
      }
      if (kept.empty()) {
        waiting_.erase(list);
      } else {
        list->second.waiters = std::move(kept);
        list->second.stale = 0;
      }
    }
  }
  state.awaited.clear();
}

absl::Status StoreState::Apply(StoreClientId client, const StoreRequest& request,
                               std::vector<StoreOutput>& out) {
  auto found = clients_.find(client);
  if (found == clients_.end()) {
    return absl::FailedPreconditionError("a request from a client that is not connected");
  }
  Client& state = found->second;
  if (!state.validated) {
    if (request.op != StoreOp::kValidate) {
      return absl::FailedPreconditionError(absl::StrCat("the first request was ",
                                                        StoreOpName(request.op),
                                                        ", not VALIDATE (not a TCPStore client?)"));
    }
    if (request.word != kStoreValidationMagic) {
      return absl::InvalidArgumentError(absl::StrCat("VALIDATE with magic number ", request.word,
                                                     ", not ", kStoreValidationMagic));
    }
    state.validated = true;
    ++requests_[static_cast<std::size_t>(StoreOp::kValidate)];
    return absl::OkStatus();
  }
  const bool waits = request.op == StoreOp::kWait || request.op == StoreOp::kBarrier;
  if (state.keys_awaited > 0 && request.op != StoreOp::kCancelWait) {
    return absl::FailedPreconditionError(absl::StrCat(StoreOpName(request.op), " while its ",
                                                      waits ? "previous " : "", "wait is pending"));
  }
  ++requests_[static_cast<std::size_t>(request.op)];
  const std::string& key = request.keys.empty() ? std::string() : request.keys.front();
  switch (request.op) {
    case StoreOp::kValidate:
      return absl::FailedPreconditionError("a second VALIDATE");
    case StoreOp::kPing: {
      std::string reply;
      AppendStoreU32(reply, request.word);
      out.push_back({client, std::move(reply)});
      return absl::OkStatus();
    }
    case StoreOp::kSet:
      if (absl::Status put = Put(key, request.values[0]); !put.ok()) return put;
      WakeAll(key, out);
      return absl::OkStatus();
    case StoreOp::kMultiSet:
      for (std::size_t i = 0; i < request.keys.size(); ++i) {
        if (absl::Status put = Put(request.keys[i], request.values[i]); !put.ok()) return put;
        WakeAll(request.keys[i], out);
      }
      return absl::OkStatus();
    case StoreOp::kAppend: {
      auto existing = values_.find(key);
      std::string value = existing == values_.end() ? std::string() : existing->second;
      value += request.values[0];
      if (absl::Status put = Put(key, std::move(value)); !put.ok()) return put;
      WakeAll(key, out);
      return absl::OkStatus();
    }
    case StoreOp::kAdd: {
      std::int64_t value = 0;
      if (auto existing = values_.find(key); existing != values_.end()) {
        if (absl::Status parsed = ParseCounter(key, existing->second, value); !parsed.ok()) {
          return parsed;
        }
      }
      if ((request.number > 0 &&
           value > std::numeric_limits<std::int64_t>::max() - request.number) ||
          (request.number < 0 &&
           value < std::numeric_limits<std::int64_t>::min() - request.number)) {
        return absl::OutOfRangeError(absl::StrCat("ADD of ", request.number, " to '", key, "' (",
                                                  value, ") overflows 64 bits"));
      }
      value += request.number;
      if (absl::Status put = Put(key, std::to_string(value)); !put.ok()) return put;
      out.push_back({client, I64(value)});
      WakeAll(key, out);
      return absl::OkStatus();
    }
    case StoreOp::kCompareSet: {
      const std::string& expected = request.values[0];
      const std::string& desired = request.values[1];
      auto existing = values_.find(key);
      std::string reply;
      if (existing == values_.end()) {
        if (expected.empty()) {
          if (absl::Status put = Put(key, desired); !put.ok()) return put;
          reply = desired;
        } else {
          reply = expected;  // c10d's answer for a missing key
        }
      } else {
        if (existing->second == expected) {
          if (absl::Status put = Put(key, desired); !put.ok()) return put;
        }
        reply = values_.at(key);
      }
      out.push_back({client, Bytes(reply)});
      WakeAll(key, out);
      return absl::OkStatus();
    }
    case StoreOp::kGet: {
      auto existing = values_.find(key);
      if (existing != values_.end() && existing->second.size() > limits_.max_reply_bytes) {
        return absl::ResourceExhaustedError(absl::StrCat(  // a value APPENDs made that large
            "GET of a value of ", existing->second.size(), " bytes (at most ",
            limits_.max_reply_bytes, ")"));
      }
      out.push_back({client, Bytes(existing == values_.end() ? "" : existing->second)});
      return absl::OkStatus();
    }
    case StoreOp::kMultiGet: {
      std::size_t size = 0;
      for (const std::string& each : request.keys) {
        auto existing = values_.find(each);
        size += 8 + (existing == values_.end() ? 0 : existing->second.size());
      }
      if (size > limits_.max_reply_bytes) {
        return absl::ResourceExhaustedError(
            absl::StrCat("MULTI_GET of ", request.keys.size(), " keys would answer ", size,
                         " bytes (at most ", limits_.max_reply_bytes, ")"));
      }
      std::string reply;
      reply.reserve(size);
      for (const std::string& each : request.keys) {
        auto existing = values_.find(each);
        AppendStoreBytes(reply, existing == values_.end() ? "" : existing->second);
      }
      if (!reply.empty()) out.push_back({client, std::move(reply)});  // no keys, no bytes
      return absl::OkStatus();
    }
    case StoreOp::kCheck: {
      bool all = true;
      for (const std::string& each : request.keys) all = all && Present(each);
      out.push_back({client, U8(all ? kStoreReady : kStoreNotReady)});
      return absl::OkStatus();
    }
    case StoreOp::kWait:
      Wait(client, state, request.keys, out);
      return absl::OkStatus();
    case StoreOp::kCancelWait:
      ClearWait(client);
      out.push_back({client, U8(kStoreWaitCanceled)});
      return absl::OkStatus();
    case StoreOp::kNumKeys:
      out.push_back({client, I64(static_cast<std::int64_t>(values_.size()))});
      return absl::OkStatus();
    case StoreOp::kDeleteKey: {
      auto existing = values_.find(key);
      std::int64_t deleted = 0;
      if (existing != values_.end()) {
        bytes_ -= std::min(bytes_, EntrySize(key, existing->second.size()));
        values_.erase(existing);
        deleted = 1;
      }
      out.push_back({client, I64(deleted)});
      return absl::OkStatus();
    }
    case StoreOp::kListKeys: {
      std::size_t size = 8;
      for (const auto& [each, value] : values_) size += 8 + each.size();
      if (size > limits_.max_reply_bytes) {
        return absl::ResourceExhaustedError(absl::StrCat(
            "LIST_KEYS would answer ", size, " bytes (at most ", limits_.max_reply_bytes, ")"));
      }
      std::string reply;
      reply.reserve(size);
      AppendStoreI64(reply, static_cast<std::int64_t>(values_.size()));
      for (const auto& [each, value] : values_) AppendStoreBytes(reply, each);
      out.push_back({client, std::move(reply)});
      return absl::OkStatus();
    }
    case StoreOp::kQueuePush: {
      auto queue = queues_.find(key);
      const std::size_t more = EntrySize({}, request.values[0].size()) +
                               (queue == queues_.end() ? EntrySize(key, 0) : 0);
      if (absl::Status charged = Charge(more, 0); !charged.ok()) return charged;
      queues_[key].push_back(request.values[0]);
      WakeOne(key, out);
      return absl::OkStatus();
    }
    case StoreOp::kQueuePop: {
      std::string reply;
      auto queue = queues_.find(key);
      if (queue == queues_.end() || queue->second.empty()) {
        AppendStoreI64(reply, 0);
      } else {
        AppendStoreI64(reply, static_cast<std::int64_t>(queue->second.size()));
        AppendStoreBytes(reply, queue->second.front());
        bytes_ -= std::min(bytes_, EntrySize({}, queue->second.front().size()));
        queue->second.pop_front();
        if (queue->second.empty()) {
          bytes_ -= std::min(bytes_, EntrySize(key, 0));
          queues_.erase(queue);
        }
      }
      out.push_back({client, std::move(reply)});
      return absl::OkStatus();
    }
    case StoreOp::kQueueLen: {
      auto queue = queues_.find(key);
      out.push_back(
          {client,
           I64(queue == queues_.end() ? 0 : static_cast<std::int64_t>(queue->second.size()))});
      return absl::OkStatus();
    }
    case StoreOp::kBarrier: {
      std::int64_t count = 0;
      if (auto existing = values_.find(key); existing != values_.end()) {
        if (absl::Status parsed = ParseCounter(key, existing->second, count); !parsed.ok()) {
          return parsed;
        }
      }
      if (count == std::numeric_limits<std::int64_t>::max()) {
        return absl::OutOfRangeError(absl::StrCat("BARRIER '", key, "' counted past 64 bits"));
      }
      ++count;
      if (absl::Status put = Put(key, std::to_string(count)); !put.ok()) return put;
      if (count >= request.number) {
        WakeAll(key, out);
        out.push_back({client, U8(kStoreStopWaiting)});
      } else {
        ++state.wait;
        waiting_[key].waiters.push_back({client, state.wait});
        state.awaited = {key};
        state.keys_awaited = 1;
      }
      return absl::OkStatus();
    }
  }
  return absl::InvalidArgumentError("an unknown operation");
}

StoreCounts StoreState::Counts() const {
  StoreCounts counts;
  counts.keys = values_.size();
  counts.queues = queues_.size();
  counts.bytes = bytes_;
  counts.clients = clients_.size();
  for (const auto& [id, client] : clients_) {
    if (client.keys_awaited > 0) ++counts.waiting_clients;
  }
  counts.requests = requests_;
  return counts;
}

}  // namespace mxrun
