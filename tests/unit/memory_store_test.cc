#include <catch2/catch.hpp>

#include <optional>
#include <string>
#include <vector>

#include "rendezvous/master_server/memory_store.h"

using mxrun::MemoryStore;

namespace {

std::optional<std::string> Value(const char* text) { return std::string(text); }

}  // namespace

TEST_CASE("MemoryStore set replaces and get reads", "[memory_store]") {
  MemoryStore store;
  CHECK(store.Get("run", "k") == std::nullopt);
  REQUIRE(store.Set("run", "k", "v1").ok());
  CHECK(store.Get("run", "k") == Value("v1"));
  REQUIRE(store.Set("run", "k", "v2").ok());
  CHECK(store.Get("run", "k") == Value("v2"));
  REQUIRE(store.Set("run", "empty", "").ok());
  CHECK(store.Get("run", "empty") == Value(""));
  const std::string binary("a\0b", 3);
  REQUIRE(store.Set("run", "bin", binary).ok());
  CHECK(store.Get("run", "bin") == binary);
}

TEST_CASE("MemoryStore add counts from absent and from a stored number", "[memory_store]") {
  MemoryStore store;
  CHECK(*store.Add("run", "n", 5) == 5);
  CHECK(*store.Add("run", "n", -2) == 3);
  CHECK(store.Get("run", "n") == Value("3"));
  REQUIRE(store.Set("run", "seeded", "40").ok());
  CHECK(*store.Add("run", "seeded", 2) == 42);
  CHECK(*store.Add("run", "zero", 0) == 0);
  CHECK(store.Get("run", "zero") == Value("0"));
}

TEST_CASE("MemoryStore add to a non-numeric value fails and changes nothing", "[memory_store]") {
  MemoryStore store;
  REQUIRE(store.Set("run", "word", "hello").ok());
  auto result = store.Add("run", "word", 1);
  REQUIRE_FALSE(result.ok());
  CHECK(result.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(result.status().message()), Catch::Contains("word"));
  CHECK(store.Get("run", "word") == Value("hello"));

  REQUIRE(store.Set("run", "blank", "").ok());
  CHECK(store.Add("run", "blank", 1).status().code() == absl::StatusCode::kInvalidArgument);

  REQUIRE(store.Set("run", "big", "9223372036854775807").ok());
  CHECK(store.Add("run", "big", 1).status().code() == absl::StatusCode::kOutOfRange);
  CHECK(store.Get("run", "big") == Value("9223372036854775807"));
}

TEST_CASE("MemoryStore compare-set with an expected value", "[memory_store]") {
  MemoryStore store;
  auto absent = store.CompareSet("run", "k", "x", /*expect_absent=*/false, "y");
  REQUIRE(absent.ok());
  CHECK_FALSE(absent->swapped);
  CHECK(absent->value == std::nullopt);
  CHECK(store.Get("run", "k") == std::nullopt);

  REQUIRE(store.Set("run", "k", "x").ok());
  auto mismatch = store.CompareSet("run", "k", "other", false, "y");
  REQUIRE(mismatch.ok());
  CHECK_FALSE(mismatch->swapped);
  CHECK(mismatch->value == Value("x"));

  auto match = store.CompareSet("run", "k", "x", false, "y");
  REQUIRE(match.ok());
  CHECK(match->swapped);
  CHECK(match->value == Value("y"));
  CHECK(store.Get("run", "k") == Value("y"));
}

TEST_CASE("MemoryStore compare-set expecting the key absent", "[memory_store]") {
  MemoryStore store;
  auto first = store.CompareSet("run", "leader", "", /*expect_absent=*/true, "node-a");
  REQUIRE(first.ok());
  CHECK(first->swapped);
  CHECK(first->value == Value("node-a"));

  auto second = store.CompareSet("run", "leader", "", true, "node-b");
  REQUIRE(second.ok());
  CHECK_FALSE(second->swapped);
  CHECK(second->value == Value("node-a"));
}

TEST_CASE("MemoryStore delete removes a key once", "[memory_store]") {
  MemoryStore store;
  REQUIRE(store.Set("run", "k", "v").ok());
  CHECK(store.Delete("run", "k"));
  CHECK(store.Get("run", "k") == std::nullopt);
  CHECK_FALSE(store.Delete("run", "k"));
  CHECK_FALSE(store.Delete("no-such-run", "k"));
}

TEST_CASE("MemoryStore multiget answers in order with gaps", "[memory_store]") {
  MemoryStore store;
  REQUIRE(store.Set("run", "a", "1").ok());
  REQUIRE(store.Set("run", "c", "3").ok());
  auto values = store.MultiGet("run", {"c", "b", "a", "a"});
  REQUIRE(values.size() == 4);
  CHECK(values[0] == Value("3"));
  CHECK(values[1] == std::nullopt);
  CHECK(values[2] == Value("1"));
  CHECK(values[3] == Value("1"));
  CHECK(store.MultiGet("other", {"a"}) == std::vector<std::optional<std::string>>{std::nullopt});
  CHECK(store.MultiGet("run", {}).empty());
}

TEST_CASE("MemoryStore keeps runs apart", "[memory_store]") {
  MemoryStore store;
  REQUIRE(store.Set("run-a", "k", "a").ok());
  REQUIRE(store.Set("run-b", "k", "b").ok());
  CHECK(store.Get("run-a", "k") == Value("a"));
  CHECK(store.Get("run-b", "k") == Value("b"));
  CHECK(*store.Add("run-a", "n", 1) == 1);
  CHECK(*store.Add("run-b", "n", 10) == 10);
  CHECK(store.Delete("run-a", "k"));
  CHECK(store.Get("run-b", "k") == Value("b"));
  CHECK(store.DeleteRun("run-b") == 2);
  CHECK(store.Get("run-b", "n") == std::nullopt);
  CHECK(store.Get("run-a", "n") == Value("1"));
  CHECK(store.DeleteRun("run-b") == 0);
}

TEST_CASE("MemoryStore refuses keys beyond the per-run limit", "[memory_store]") {
  MemoryStore store(mxrun::MemoryStoreOptions{.max_keys_per_run = 2});
  REQUIRE(store.Set("run", "a", "1").ok());
  REQUIRE(store.Set("run", "b", "2").ok());
  absl::Status full = store.Set("run", "c", "3");
  CHECK(full.code() == absl::StatusCode::kResourceExhausted);
  CHECK_THAT(std::string(full.message()), Catch::Contains("run"));
  CHECK(store.Add("run", "c", 1).status().code() == absl::StatusCode::kResourceExhausted);
  CHECK(store.CompareSet("run", "c", "", true, "3").status().code() ==
        absl::StatusCode::kResourceExhausted);
  CHECK(store.Get("run", "c") == std::nullopt);
  // Existing keys still change, other runs have their own budget, and deleting frees a slot.
  CHECK(store.Set("run", "a", "one").ok());
  CHECK(store.Add("run", "b", 1).ok());
  CHECK(store.Set("other", "c", "3").ok());
  CHECK(store.Delete("run", "a"));
  CHECK(store.Set("run", "c", "3").ok());
}

TEST_CASE("MemoryStore default key limit is kMaxKeysPerRun", "[memory_store]") {
  CHECK(mxrun::MemoryStoreOptions{}.max_keys_per_run == mxrun::kMaxKeysPerRun);
}

TEST_CASE("MemoryStore waiter fires at once when the keys exist", "[memory_store][wait]") {
  MemoryStore store;
  REQUIRE(store.Set("run", "a", "1").ok());
  REQUIRE(store.Set("run", "b", "2").ok());
  int fired = 0;
  MemoryStore::WaitHandle handle = store.AddWaiter("run", {"a", "b"}, [&] { ++fired; });
  CHECK(fired == 1);
  CHECK(store.WaiterCount() == 0);
  CHECK_FALSE(store.CancelWaiter(handle));

  store.AddWaiter("run", {}, [&] { ++fired; });
  CHECK(fired == 2);
}

TEST_CASE("MemoryStore waiter fires when the last key is created", "[memory_store][wait]") {
  MemoryStore store;
  int fired = 0;
  store.AddWaiter("run", {"a", "b", "a"}, [&] { ++fired; });
  CHECK(store.WaiterCount() == 1);
  REQUIRE(store.Set("run", "a", "1").ok());
  CHECK(fired == 0);
  REQUIRE(store.Set("run", "a", "again").ok());
  CHECK(fired == 0);
  CHECK(*store.Add("run", "b", 1) == 1);
  CHECK(fired == 1);
  CHECK(store.WaiterCount() == 0);
  REQUIRE(store.Set("run", "c", "3").ok());
  CHECK(fired == 1);  // once only
}

TEST_CASE("MemoryStore waiter fires on compare-set creating the key", "[memory_store][wait]") {
  MemoryStore store;
  int fired = 0;
  store.AddWaiter("run", {"k"}, [&] { ++fired; });
  REQUIRE(store.CompareSet("run", "k", "x", false, "y").ok());  // no swap: nothing created
  CHECK(fired == 0);
  REQUIRE(store.CompareSet("run", "k", "", true, "y").ok());
  CHECK(fired == 1);
}

TEST_CASE("MemoryStore waiter ignores other runs", "[memory_store][wait]") {
  MemoryStore store;
  int fired = 0;
  store.AddWaiter("run-a", {"k"}, [&] { ++fired; });
  REQUIRE(store.Set("run-b", "k", "v").ok());
  CHECK(fired == 0);
  REQUIRE(store.Set("run-a", "k", "v").ok());
  CHECK(fired == 1);
}

TEST_CASE("MemoryStore waiter sees a deleted key missing again", "[memory_store][wait]") {
  MemoryStore store;
  int fired = 0;
  store.AddWaiter("run", {"a", "b"}, [&] { ++fired; });
  REQUIRE(store.Set("run", "a", "1").ok());
  CHECK(store.Delete("run", "a"));
  REQUIRE(store.Set("run", "b", "2").ok());
  CHECK(fired == 0);
  REQUIRE(store.Set("run", "a", "1").ok());
  CHECK(fired == 1);
}

TEST_CASE("MemoryStore waiter survives DeleteRun", "[memory_store][wait]") {
  MemoryStore store;
  int fired = 0;
  store.AddWaiter("run", {"a", "b"}, [&] { ++fired; });
  REQUIRE(store.Set("run", "a", "1").ok());
  CHECK(store.DeleteRun("run") == 1);
  CHECK(store.WaiterCount() == 1);
  REQUIRE(store.Set("run", "b", "2").ok());
  CHECK(fired == 0);
  REQUIRE(store.Set("run", "a", "1").ok());
  CHECK(fired == 1);
}

TEST_CASE("MemoryStore cancelled waiter never fires and reports missing keys",
          "[memory_store][wait]") {
  MemoryStore store;
  int fired = 0;
  MemoryStore::WaitHandle handle = store.AddWaiter("run", {"c", "a", "b"}, [&] { ++fired; });
  REQUIRE(store.Set("run", "a", "1").ok());
  std::vector<std::string> missing;
  CHECK(store.CancelWaiter(handle, &missing));
  CHECK(missing == std::vector<std::string>{"c", "b"});
  CHECK(store.WaiterCount() == 0);
  REQUIRE(store.Set("run", "b", "2").ok());
  REQUIRE(store.Set("run", "c", "3").ok());
  CHECK(fired == 0);
  CHECK_FALSE(store.CancelWaiter(handle));
}

TEST_CASE("MemoryStore waiter callback may call back into the store", "[memory_store][wait]") {
  MemoryStore store;
  int fired = 0;
  store.AddWaiter("run", {"go"}, [&] {
    ++fired;
    REQUIRE(store.Set("run", "seen", "yes").ok());
  });
  REQUIRE(store.Set("run", "go", "1").ok());
  CHECK(fired == 1);
  CHECK(store.Get("run", "seen") == Value("yes"));
}

TEST_CASE("MemoryStore several waiters on one key all fire", "[memory_store][wait]") {
  MemoryStore store;
  int fired = 0;
  store.AddWaiter("run", {"k"}, [&] { ++fired; });
  store.AddWaiter("run", {"k", "other"}, [&] { fired += 10; });
  MemoryStore::WaitHandle cancelled = store.AddWaiter("run", {"k"}, [&] { fired += 100; });
  CHECK(store.CancelWaiter(cancelled));
  REQUIRE(store.Set("run", "k", "v").ok());
  CHECK(fired == 1);
  REQUIRE(store.Set("run", "other", "v").ok());
  CHECK(fired == 11);
  CHECK(store.WaiterCount() == 0);
}
