#pragma once
// MemoryStore: the master's key-value store, one namespace per run id, in memory.
//
// The operations mirror the Store service of proto/mxrun.proto (Set, Get, Add, CompareSet, Wait,
// Delete, MultiGet) and the semantics of PyTorch's TCPStore: values are byte strings, Add keeps a
// 64-bit counter as its decimal text, and a waiter is told once every key it names exists.
//
// Runs are isolated: a key of one run id is never seen through another. A run comes into being with
// its first key or waiter and goes away with its last one (or with DeleteRun).
//
// Arguments are not re-validated here: callers check run ids, keys and values with validation.h
// first (StoreService does). The store enforces only its own limit, `max_keys_per_run`.
//
// Waiting never blocks: AddWaiter registers a callback that runs once every key exists, and
// CancelWaiter withdraws it. Timeouts belong to the caller (StoreService arms a timer).
//
// Thread-safety: every method may be called from any thread; one mutex guards all state. Waiter
// callbacks run with that mutex released, on the thread of the call that completed them (AddWaiter
// itself when the keys already exist, otherwise the Set/Add/CompareSet that created the last
// missing key), so a callback may call back into the store.

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "rendezvous/wire/validation.h"

namespace mxrun {

struct MemoryStoreOptions {
  // Keys one run may hold at once; a call that would create one more fails with ResourceExhausted.
  size_t max_keys_per_run = kMaxKeysPerRun;
};

class MemoryStore {
 public:
  // Identifies a registered waiter; never reused within one store.
  using WaitHandle = uint64_t;
  using WaitCallback = absl::AnyInvocable<void()>;

  struct CompareSetResult {
    bool swapped = false;
    // The key's value after the call; nullopt when the key does not exist.
    std::optional<std::string> value;
  };

  explicit MemoryStore(MemoryStoreOptions options = {});
  MemoryStore(const MemoryStore&) = delete;
  MemoryStore& operator=(const MemoryStore&) = delete;
  ~MemoryStore();

  // Stores `value` under `key`, replacing any value. ResourceExhausted when the key is new and the
  // run already holds max_keys_per_run keys.
  absl::Status Set(absl::string_view run_id, absl::string_view key, absl::string_view value);

  // The value under `key`, or nullopt when the key does not exist.
  std::optional<std::string> Get(absl::string_view run_id, absl::string_view key) const;

  // Adds `delta` to the counter under `key` and returns the new value. An absent key counts as 0.
  // The counter is stored as decimal text ("42"), so Get sees it and Set can seed it.
  // InvalidArgument when the present value is not a decimal int64; OutOfRange when the sum
  // overflows int64; ResourceExhausted as for Set. On error nothing changes.
  absl::StatusOr<int64_t> Add(absl::string_view run_id, absl::string_view key, int64_t delta);

  // Stores `desired` under `key` if the key does not exist (`expect_absent`) or, otherwise, if it
  // exists and holds exactly `expected`. Returns whether it swapped and the value the key holds
  // afterwards. ResourceExhausted as for Set.
  absl::StatusOr<CompareSetResult> CompareSet(absl::string_view run_id, absl::string_view key,
                                              absl::string_view expected, bool expect_absent,
                                              absl::string_view desired);

  // Removes `key`; returns whether it existed. Waiters that already saw the key see it missing
  // again.
  bool Delete(absl::string_view run_id, absl::string_view key);

  // The values under `keys`, in order; nullopt for each key that does not exist.
  std::vector<std::optional<std::string>> MultiGet(absl::string_view run_id,
                                                   const std::vector<std::string>& keys) const;

  // Removes every key of `run_id`; returns how many there were. Waiters of the run stay
  // registered (their keys are all missing again) until they are cancelled or satisfied.
  size_t DeleteRun(absl::string_view run_id);

  // Registers `callback` to run once, as soon as every one of `keys` exists in `run_id` (at once,
  // before AddWaiter returns, when they all exist already, or when `keys` is empty). The callback
  // may run before AddWaiter returns, on this thread or on another; see the thread-safety note.
  WaitHandle AddWaiter(absl::string_view run_id, const std::vector<std::string>& keys,
                       WaitCallback callback);

  // Withdraws a waiter. Returns true when it was still registered: its callback will never run,
  // and `missing_keys` (when given) receives the keys that did not exist, in the order the waiter
  // named them. Returns false when the callback has already run or is running (or the handle is
  // unknown); `missing_keys` is left alone.
  bool CancelWaiter(WaitHandle handle, std::vector<std::string>* missing_keys = nullptr);

  // Registered waiters, over every run (for status reports and tests).
  size_t WaiterCount() const;

 private:
  struct Waiter {
    std::string run_id;
    std::vector<std::string> keys;  // as named, duplicates removed
    std::set<std::string> missing;
    WaitCallback callback;
  };
  struct Run {
    std::map<std::string, std::string> values;
    // Every waiter of this run that names the key.
    std::map<std::string, std::set<WaitHandle>> waiters_by_key;
  };
  using Callbacks = std::vector<WaitCallback>;

  // The run, or nullptr when it has neither keys nor waiters.
  const Run* FindRun(absl::string_view run_id) const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  // Stores `value`, creating the run if needed; a new key satisfies waiters (their callbacks are
  // moved to `ready`).
  absl::Status Put(absl::string_view run_id, absl::string_view key, std::string value,
                   Callbacks& ready) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void KeyCreated(Run& run, const std::string& key, Callbacks& ready)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RemoveWaiter(WaitHandle handle) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void EraseRunIfEmpty(const std::string& run_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  static void RunCallbacks(Callbacks& ready);

  const MemoryStoreOptions options_;
  mutable absl::Mutex mu_;
  std::map<std::string, Run, std::less<>> runs_ ABSL_GUARDED_BY(mu_);
  std::map<WaitHandle, Waiter> waiters_ ABSL_GUARDED_BY(mu_);
  WaitHandle next_handle_ ABSL_GUARDED_BY(mu_) = 1;
};

}  // namespace mxrun
