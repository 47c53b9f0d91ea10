// The master's kept state laid out in etcd (rendezvous/etcd/etcd_state_layout.h): plans applied to
// an in-memory key space, read back; a 16,384-node job within etcd's limits; generations switched
// atomically, unfinished writes ignored and cleaned up.

#include <catch2/catch.hpp>

#include <map>

#include "absl/strings/match.h"
#include "rendezvous/etcd/etcd_state_layout.h"
#include "rendezvous/master_state/master_state_file.h"
#include "tests/persisted_runs.h"

using mxrun::EtcdKeyValue;
using mxrun::EtcdOp;
using mxrun::PersistedRun;

namespace {

const std::string kPrefix = "/mxrun/service1";

// etcd's key space, as far as the plans use it.
struct FakeEtcd {
  std::map<std::string, std::string> keys;

  void Apply(const std::vector<EtcdOp>& txn) {
    for (const EtcdOp& op : txn) {
      switch (op.kind) {
        case EtcdOp::Kind::kPut:
          keys[op.key] = op.value;
          break;
        case EtcdOp::Kind::kDelete:
          keys.erase(op.key);
          break;
        case EtcdOp::Kind::kDeletePrefix:
          for (auto it = keys.lower_bound(op.key);
               it != keys.end() && absl::StartsWith(it->first, op.key);) {
            it = keys.erase(it);
          }
          break;
      }
    }
  }
  void ApplyAll(const std::vector<std::vector<EtcdOp>>& txns) {
    for (const auto& txn : txns) Apply(txn);
  }
  std::vector<EtcdKeyValue> All() const {
    std::vector<EtcdKeyValue> out;
    for (const auto& [key, value] : keys) out.push_back(EtcdKeyValue{key, value});
    return out;
  }
  mxrun::EtcdState Read() const {
    absl::StatusOr<mxrun::EtcdState> state = mxrun::ReadEtcdState(kPrefix, All());
    INFO(state.status().ToString());
    REQUIRE(state.ok());
    return *state;
  }
};

}  // namespace

TEST_CASE("etcd state: written, then read back the same", "[etcd_state]") {
  FakeEtcd etcd;
  CHECK(etcd.Read().generation == 0);  // nothing kept yet
  const std::vector<PersistedRun> runs{mxrun::testing::SampleRun("job-a", 3),
                                       mxrun::testing::SampleRun("job-b", 1)};
  auto txns = mxrun::PlanEtcdStateWrite(kPrefix, 1, 0, runs);
  CHECK(txns.size() == 1);  // small: pages and the switch in one transaction
  etcd.ApplyAll(txns);
  mxrun::EtcdState state = etcd.Read();
  CHECK(state.generation == 1);
  CHECK(mxrun::PersistedRunsToJson(state.runs) == mxrun::PersistedRunsToJson(runs));
  CHECK(state.stale.empty());
}

TEST_CASE("etcd state: a 16,384-node job fits etcd's limits", "[etcd_state]") {
  const std::vector<PersistedRun> runs{mxrun::testing::SampleRun("big", 16384),
                                       mxrun::testing::SampleRun("small", 2)};
  const mxrun::EtcdStateLimits limits;
  // The defaults stay within etcd's own: --max-txn-ops 128, --max-request-bytes 1.5 MiB.
  CHECK(limits.max_txn_ops <= 128);
  CHECK(limits.max_txn_bytes < 1536 * 1024);
  auto txns = mxrun::PlanEtcdStateWrite(kPrefix, 7, 6, runs, {}, limits);
  REQUIRE(txns.size() >= 2);  // more than one request's worth: pages first, the switch last
  for (const auto& txn : txns) {
    CHECK(txn.size() <= limits.max_txn_ops);
    size_t bytes = 0;
    for (const EtcdOp& op : txn) {
      CHECK(op.value.size() <= limits.max_page_bytes);
      bytes += op.key.size() + op.value.size();
    }
    CHECK(bytes <= limits.max_txn_bytes);
  }
  // Only the last transaction touches `current`.
  for (size_t i = 0; i + 1 < txns.size(); ++i) {
    for (const EtcdOp& op : txns[i]) CHECK(op.key != mxrun::EtcdStateCurrentKey(kPrefix));
  }
  FakeEtcd etcd;
  etcd.ApplyAll(txns);
  mxrun::EtcdState state = etcd.Read();
  REQUIRE(state.runs.size() == 2);
  CHECK(mxrun::PersistedRunsToJson(state.runs) == mxrun::PersistedRunsToJson(runs));
}

TEST_CASE("etcd state: a new generation replaces the old one whole", "[etcd_state]") {
  FakeEtcd etcd;
  etcd.ApplyAll(mxrun::PlanEtcdStateWrite(kPrefix, 1, 0, {mxrun::testing::SampleRun("job", 2000)}));
  etcd.ApplyAll(mxrun::PlanEtcdStateWrite(kPrefix, 2, 1, {mxrun::testing::SampleRun("job", 5)}));
  mxrun::EtcdState state = etcd.Read();
  CHECK(state.generation == 2);
  REQUIRE(state.runs.size() == 1);
  CHECK(state.runs[0].members.size() == 5);
  for (const auto& [key, value] : etcd.keys) {
    CHECK_FALSE(absl::StrContains(key, "/0000000000000001/"));  // generation 1 is gone
  }
  // An empty state is kept too (every run finished).
  etcd.ApplyAll(mxrun::PlanEtcdStateWrite(kPrefix, 3, 2, {}));
  CHECK(etcd.Read().generation == 3);
  CHECK(etcd.Read().runs.empty());
}

TEST_CASE("etcd state: a write cut short leaves the previous state, and is cleaned up",
          "[etcd_state]") {
  FakeEtcd etcd;
  etcd.ApplyAll(mxrun::PlanEtcdStateWrite(kPrefix, 1, 0, {mxrun::testing::SampleRun("job", 4)}));
  // A leader writes generation 2's pages and dies before switching.
  auto unfinished =
      mxrun::PlanEtcdStateWrite(kPrefix, 2, 1, {mxrun::testing::SampleRun("job", 16384)});
  REQUIRE(unfinished.size() >= 2);
  etcd.Apply(unfinished[0]);
  mxrun::EtcdState state = etcd.Read();
  CHECK(state.generation == 1);
  CHECK(state.runs[0].members.size() == 4);
  CHECK(state.stale == std::vector<int64_t>{2});
  // Its successor writes generation 3 and removes the orphaned pages with the old generation.
  etcd.ApplyAll(
      mxrun::PlanEtcdStateWrite(kPrefix, 3, 1, {mxrun::testing::SampleRun("job", 3)}, state.stale));
  state = etcd.Read();
  CHECK(state.generation == 3);
  CHECK(state.stale.empty());
  CHECK(etcd.keys.size() == 2);  // current and one page
}

TEST_CASE("etcd state: damage is an error naming the key", "[etcd_state]") {
  FakeEtcd etcd;
  etcd.ApplyAll(mxrun::PlanEtcdStateWrite(kPrefix, 1, 0, {mxrun::testing::SampleRun("job", 2)}));
  etcd.keys[kPrefix + "/state/0000000000000001/page/000000"] = "{not json";
  auto damaged = mxrun::ReadEtcdState(kPrefix, etcd.All());
  REQUIRE_FALSE(damaged.ok());
  CHECK_THAT(std::string(damaged.status().message()),
             Catch::Contains(kPrefix + "/state/0000000000000001/page/000000"));
  etcd.keys[mxrun::EtcdStateCurrentKey(kPrefix)] = "two";
  CHECK_THAT(std::string(mxrun::ReadEtcdState(kPrefix, etcd.All()).status().message()),
             Catch::Contains("not a generation"));
  etcd.keys[mxrun::EtcdStateCurrentKey(kPrefix)] = "0000000000000009";
  CHECK_THAT(std::string(mxrun::ReadEtcdState(kPrefix, etcd.All()).status().message()),
             Catch::Contains("has no pages"));
}
