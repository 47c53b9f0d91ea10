#include "rendezvous/master_server/memory_store.h"

#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace mxrun {

MemoryStore::MemoryStore(MemoryStoreOptions options) : options_(options) {}

MemoryStore::~MemoryStore() = default;

absl::Status MemoryStore::Set(absl::string_view run_id, absl::string_view key,
                              absl::string_view value) {
  Callbacks ready;
  absl::Status status;
  {
    absl::MutexLock lock(&mu_);
    status = Put(run_id, key, std::string(value), ready);
  }
  RunCallbacks(ready);
  return status;
}

std::optional<std::string> MemoryStore::Get(absl::string_view run_id, absl::string_view key) const {
  absl::ReaderMutexLock lock(&mu_);
  const Run* run = FindRun(run_id);
  if (run == nullptr) return std::nullopt;
  auto it = run->values.find(std::string(key));
  if (it == run->values.end()) return std::nullopt;
  return it->second;
}

absl::StatusOr<int64_t> MemoryStore::Add(absl::string_view run_id, absl::string_view key,
                                         int64_t delta) {
  Callbacks ready;
  int64_t result = 0;
  absl::Status status;
  {
    absl::MutexLock lock(&mu_);
    int64_t current = 0;
    if (const Run* run = FindRun(run_id); run != nullptr) {
      auto it = run->values.find(std::string(key));
      if (it != run->values.end() && !absl::SimpleAtoi(it->second, &current)) {
        return absl::InvalidArgumentError(absl::StrCat("cannot add to key '", key,
                                                       "': its value is not a decimal int64 (",
                                                       it->second.size(), " bytes)"));
      }
    }
    if (__builtin_add_overflow(current, delta, &result)) {
      return absl::OutOfRangeError(
          absl::StrCat("adding ", delta, " to key '", key, "' (", current, ") overflows int64"));
    }
    status = Put(run_id, key, absl::StrCat(result), ready);
  }
  RunCallbacks(ready);
  if (!status.ok()) return status;
  return result;
}

absl::StatusOr<MemoryStore::CompareSetResult> MemoryStore::CompareSet(absl::string_view run_id,
                                                                      absl::string_view key,
                                                                      absl::string_view expected,
                                                                      bool expect_absent,
                                                                      absl::string_view desired) {
  Callbacks ready;
  CompareSetResult result;
  {
    absl::MutexLock lock(&mu_);
    std::optional<std::string> current;
    if (const Run* run = FindRun(run_id); run != nullptr) {
      auto it = run->values.find(std::string(key));
      if (it != run->values.end()) current = it->second;
    }
    const bool swap = expect_absent
                          ? !current.has_value()
                          : current.has_value() && absl::string_view(*current) == expected;
    if (swap) {
      absl::Status status = Put(run_id, key, std::string(desired), ready);
      if (!status.ok()) return status;
      result.swapped = true;
      result.value = std::string(desired);
    } else {
      result.value = std::move(current);
    }
  }
  RunCallbacks(ready);
  return result;
}

bool MemoryStore::Delete(absl::string_view run_id, absl::string_view key) {
  absl::MutexLock lock(&mu_);
  auto run_it = runs_.find(run_id);
  if (run_it == runs_.end()) return false;
  Run& run = run_it->second;
  const std::string key_string(key);
  if (run.values.erase(key_string) == 0) return false;
  if (auto w = run.waiters_by_key.find(key_string); w != run.waiters_by_key.end()) {
    for (WaitHandle handle : w->second) waiters_.at(handle).missing.insert(key_string);
  }
  EraseRunIfEmpty(run_it->first);
  return true;
}

std::vector<std::optional<std::string>> MemoryStore::MultiGet(
    absl::string_view run_id, const std::vector<std::string>& keys) const {
  absl::ReaderMutexLock lock(&mu_);
  std::vector<std::optional<std::string>> values(keys.size());
  const Run* run = FindRun(run_id);
  if (run == nullptr) return values;
  for (size_t i = 0; i < keys.size(); ++i) {
    auto it = run->values.find(keys[i]);
    if (it != run->values.end()) values[i] = it->second;
  }
  return values;
}

size_t MemoryStore::DeleteRun(absl::string_view run_id) {
  absl::MutexLock lock(&mu_);
  auto run_it = runs_.find(run_id);
  if (run_it == runs_.end()) return 0;
  Run& run = run_it->second;
  const size_t removed = run.values.size();
  run.values.clear();
  for (const auto& [key, handles] : run.waiters_by_key) {
    for (WaitHandle handle : handles) waiters_.at(handle).missing.insert(key);
  }
  EraseRunIfEmpty(run_it->first);
  return removed;
}

MemoryStore::WaitHandle MemoryStore::AddWaiter(absl::string_view run_id,
                                               const std::vector<std::string>& keys,
                                               WaitCallback callback) {
  WaitHandle handle = 0;
  {
    absl::MutexLock lock(&mu_);
    handle = next_handle_++;
    Waiter waiter;
    waiter.run_id = std::string(run_id);
    const Run* existing = FindRun(run_id);
    std::set<std::string> named;
    for (const std::string& key : keys) {
      if (!named.insert(key).second) continue;
      waiter.keys.push_back(key);
      if (existing == nullptr || !existing->values.contains(key)) waiter.missing.insert(key);
    }
    if (!waiter.missing.empty()) {
      Run& run = runs_[waiter.run_id];
      for (const std::string& key : waiter.keys) run.waiters_by_key[key].insert(handle);
      waiter.callback = std::move(callback);
      waiters_.emplace(handle, std::move(waiter));
      return handle;
    }
  }
  callback();
  return handle;
}

bool MemoryStore::CancelWaiter(WaitHandle handle, std::vector<std::string>* missing_keys) {
  absl::MutexLock lock(&mu_);
  auto it = waiters_.find(handle);
  if (it == waiters_.end()) return false;
  if (missing_keys != nullptr) {
    missing_keys->clear();
    for (const std::string& key : it->second.keys) {
      if (it->second.missing.contains(key)) missing_keys->push_back(key);
    }
  }
  RemoveWaiter(handle);
  return true;
}

size_t MemoryStore::WaiterCount() const {
  absl::ReaderMutexLock lock(&mu_);
  return waiters_.size();
}

const MemoryStore::Run* MemoryStore::FindRun(absl::string_view run_id) const {
  auto it = runs_.find(run_id);
  return it == runs_.end() ? nullptr : &it->second;
}

absl::Status MemoryStore::Put(absl::string_view run_id, absl::string_view key, std::string value,
                              Callbacks& ready) {
  const std::string key_string(key);
  auto run_it = runs_.find(run_id);
  if (run_it != runs_.end()) {
    auto it = run_it->second.values.find(key_string);
    if (it != run_it->second.values.end()) {
      it->second = std::move(value);
      return absl::OkStatus();
    }
  }
  const size_t held = run_it == runs_.end() ? 0 : run_it->second.values.size();
  if (held >= options_.max_keys_per_run) {
    return absl::ResourceExhaustedError(absl::StrCat("run '", run_id, "' already holds ", held,
                                                     " keys, the most allowed; cannot add '",
                                                     key.substr(0, 64), "'"));
  }
  if (run_it == runs_.end()) run_it = runs_.emplace(std::string(run_id), Run{}).first;
  run_it->second.values.emplace(key_string, std::move(value));
  KeyCreated(run_it->second, key_string, ready);
  return absl::OkStatus();
}

void MemoryStore::KeyCreated(Run& run, const std::string& key, Callbacks& ready) {
  auto w = run.waiters_by_key.find(key);
  if (w == run.waiters_by_key.end()) return;
  std::vector<WaitHandle> satisfied;
  for (WaitHandle handle : w->second) {
    Waiter& waiter = waiters_.at(handle);
    waiter.missing.erase(key);
    if (waiter.missing.empty()) satisfied.push_back(handle);
  }
  // RemoveWaiter edits run.waiters_by_key (and `w`), so it runs after the scan. The run itself
  // stays: it holds the key just created.
  for (WaitHandle handle : satisfied) {
    ready.push_back(std::move(waiters_.at(handle).callback));
    RemoveWaiter(handle);
  }
}

void MemoryStore::RemoveWaiter(WaitHandle handle) {
  auto it = waiters_.find(handle);
  if (it == waiters_.end()) return;
  const std::string run_id = it->second.run_id;
  if (auto run_it = runs_.find(run_id); run_it != runs_.end()) {
    for (const std::string& key : it->second.keys) {
      auto w = run_it->second.waiters_by_key.find(key);
      if (w == run_it->second.waiters_by_key.end()) continue;
      w->second.erase(handle);
      if (w->second.empty()) run_it->second.waiters_by_key.erase(w);
    }
  }
  waiters_.erase(it);
  EraseRunIfEmpty(run_id);
}

void MemoryStore::EraseRunIfEmpty(const std::string& run_id) {
  auto it = runs_.find(run_id);
  if (it != runs_.end() && it->second.values.empty() && it->second.waiters_by_key.empty()) {
    runs_.erase(it);
  }
}

void MemoryStore::RunCallbacks(Callbacks& ready) {
  for (WaitCallback& callback : ready) callback();
}

}  // namespace mxrun
