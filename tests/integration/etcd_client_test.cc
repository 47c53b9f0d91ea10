// mxrun's etcd client (rendezvous/etcd/etcd_client.h) against real etcd members started by the
// test: keys, fenced transactions, leases, the election service, watching a key, a 3-member cluster
// losing a member, and the master's state laid out for 16,384 nodes. Every wait is bounded.

#include <catch2/catch.hpp>

#include <thread>

#include "rendezvous/etcd/etcd_client.h"
#include "rendezvous/etcd/etcd_state_layout.h"
#include "tests/etcd_cluster.h"
#include "tests/persisted_runs.h"

using namespace std::chrono_literals;
using mxrun::EtcdClient;
using mxrun::EtcdOp;
using mxrun::PersistedRun;
using mxrun::testing::EtcdCluster;

TEST_CASE("etcd: keys, prefixes and deletes", "[etcd]") {
  EtcdCluster etcd;
  auto client = etcd.Client();
  REQUIRE(client->Put("/job/a", "1").ok());
  REQUIRE(client->Put("/job/b", "2").ok());
  REQUIRE(client->Put("/jobx", "not in the prefix").ok());
  auto a = client->Get("/job/a");
  REQUIRE(a.ok());
  REQUIRE(a->has_value());
  CHECK((*a)->value == "1");
  CHECK(client->Get("/job/none")->has_value() == false);
  auto all = client->GetPrefix("/job/");
  REQUIRE(all.ok());
  REQUIRE(all->size() == 2);
  CHECK((*all)[1].key == "/job/b");
}

TEST_CASE("etcd: a transaction guarded by a key's creation revision is fenced", "[etcd]") {
  EtcdCluster etcd;
  auto client = etcd.Client();
  auto rev = client->Put("/leader", "me");
  REQUIRE(rev.ok());
  auto created = (*client->Get("/leader"))->create_revision;
  CHECK(created == *rev);
  auto ok = client->TxnIfCreated(
      "/leader", created,
      {EtcdOp{EtcdOp::Kind::kPut, "/state/x", "1"}, EtcdOp{EtcdOp::Kind::kPut, "/state/y", "2"}});
  REQUIRE(ok.ok());
  CHECK(*ok);
  // The key is re-created (another leader): the old revision no longer matches.
  REQUIRE(client->TxnIfCreated("/leader", created, {EtcdOp{EtcdOp::Kind::kDelete, "/leader", ""}})
              .ok());
  REQUIRE(client->Put("/leader", "successor").ok());
  auto fenced = client->TxnIfCreated("/leader", created,
                                     {EtcdOp{EtcdOp::Kind::kPut, "/elsewhere", "stale"},
                                      EtcdOp{EtcdOp::Kind::kDeletePrefix, "/state/", ""}});
  INFO(fenced.status().ToString());
  REQUIRE(fenced.ok());
  CHECK_FALSE(*fenced);
  // Nothing of the fenced write landed.
  CHECK((*client->Get("/state/x"))->value == "1");
  CHECK(client->GetPrefix("/state/")->size() == 2);
  CHECK_FALSE(client->Get("/elsewhere")->has_value());
}

TEST_CASE("etcd: a lease keeps its keys alive, revoked, they are gone", "[etcd]") {
  EtcdCluster etcd;
  auto client = etcd.Client();
  auto lease = client->GrantLease(5s);
  REQUIRE(lease.ok());
  REQUIRE(client->Put("/member/1", "alive", *lease).ok());
  auto ttl = client->KeepAlive(*lease);
  REQUIRE(ttl.ok());
  CHECK(*ttl >= 4);
  REQUIRE(client->RevokeLease(*lease).ok());
  CHECK_FALSE(client->Get("/member/1")->has_value());
  CHECK(*client->KeepAlive(*lease) == 0);  // expired or revoked: TTL 0
}

TEST_CASE("etcd: one leader at a time, the next wins when the first one's lease ends", "[etcd]") {
  EtcdCluster etcd;
  auto client = etcd.Client();
  auto lease1 = client->GrantLease(10s);
  auto lease2 = client->GrantLease(10s);
  REQUIRE((lease1.ok() && lease2.ok()));
  auto first = client->CreateIfAbsent("/run1/leader", "a 10.0.0.1:29400", *lease1);
  REQUIRE(first.ok());
  REQUIRE(first->has_value());
  auto read = client->Read("/run1/leader");
  REQUIRE(read.ok());
  REQUIRE(read->kv.has_value());
  CHECK(read->kv->value == "a 10.0.0.1:29400");
  CHECK(read->kv->create_revision == **first);
  CHECK(read->revision >= **first);
  // A second candidate loses while the first leads, and writes nothing.
  auto blocked = client->CreateIfAbsent("/run1/leader", "b 10.0.0.2:29400", *lease2);
  REQUIRE(blocked.ok());
  CHECK_FALSE(blocked->has_value());
  CHECK((*client->Get("/run1/leader"))->value == "a 10.0.0.1:29400");
  // The leader's lease ends: the key goes with it and the next candidate wins.
  REQUIRE(client->RevokeLease(*lease1).ok());
  auto second = client->CreateIfAbsent("/run1/leader", "b 10.0.0.2:29400", *lease2);
  REQUIRE(second.ok());
  REQUIRE(second->has_value());
  // The old leader's fenced write fails; the new one's succeeds.
  auto old_write =
      client->TxnIfCreated("/run1/leader", **first, {EtcdOp{EtcdOp::Kind::kPut, "/s", "1"}});
  auto new_write =
      client->TxnIfCreated("/run1/leader", **second, {EtcdOp{EtcdOp::Kind::kPut, "/s", "2"}});
  REQUIRE((old_write.ok() && new_write.ok()));
  CHECK_FALSE(*old_write);
  CHECK(*new_write);
}

TEST_CASE("etcd: Cancel ends a wait in progress and every later call", "[etcd]") {
  EtcdCluster etcd;
  auto client = etcd.Client();
  auto rev = client->Put("/quiet", "1");
  REQUIRE(rev.ok());
  absl::StatusOr<std::optional<int64_t>> waited;
  std::thread waiter([&] { waited = client->WaitForChange("/quiet", *rev, 30s); });
  std::this_thread::sleep_for(200ms);  // the watch is (very likely) open by now; either way it ends
  const auto start = std::chrono::steady_clock::now();
  client->Cancel();
  waiter.join();
  CHECK(std::chrono::steady_clock::now() - start < 10s);
  CHECK(waited.status().code() == absl::StatusCode::kCancelled);
  CHECK(client->Get("/quiet").status().code() == absl::StatusCode::kCancelled);
}

TEST_CASE("etcd: waiting for a key to change", "[etcd]") {
  EtcdCluster etcd;
  auto client = etcd.Client();
  auto rev = client->Put("/leader-address", "a");
  REQUIRE(rev.ok());
  auto nothing = client->WaitForChange("/leader-address", *rev, 200ms);
  REQUIRE(nothing.ok());
  CHECK_FALSE(nothing->has_value());
  auto other = etcd.Client();
  absl::Status written;  // checked on this thread: Catch's assertions are not thread-safe
  std::thread writer([&] { written = other->Put("/leader-address", "b").status(); });
  auto changed = client->WaitForChange("/leader-address", *rev, 5s);
  writer.join();
  REQUIRE(written.ok());
  REQUIRE(changed.ok());
  REQUIRE(changed->has_value());
  CHECK(**changed > *rev);
}

TEST_CASE("etcd: a 3-member cluster serves on when one member dies", "[etcd]") {
  EtcdCluster etcd(3);
  auto client = etcd.Client();
  REQUIRE(client->Put("/k", "before").ok());
  etcd.Kill(0);
  // The channel moves on to the members still up (bounded retries while it notices).
  absl::Status last;
  bool written = false;
  for (int attempt = 0; attempt < 50 && !written; ++attempt) {
    auto rev = client->Put("/k", "after");
    written = rev.ok();
    last = rev.status();
    if (!written) std::this_thread::sleep_for(100ms);
  }
  INFO(last.ToString());
  REQUIRE(written);
  CHECK((*client->Get("/k"))->value == "after");
}

TEST_CASE(
    "etcd: a 16,384-node state goes in through fenced transactions, and a deposed leader's "
    "does not",
    "[etcd]") {
  EtcdCluster etcd;
  auto client = etcd.Client();
  PersistedRun run = mxrun::testing::SampleRun("big", 16384);
  auto lease = client->GrantLease(10s);
  REQUIRE(lease.ok());
  auto leader = client->CreateIfAbsent("/mxrun/svc/leader", "me", *lease);
  REQUIRE(leader.ok());
  REQUIRE(leader->has_value());
  for (const auto& txn : mxrun::PlanEtcdStateWrite("/mxrun/svc", 1, 0, {run})) {
    auto applied = client->TxnIfCreated("/mxrun/svc/leader", **leader, txn);
    INFO(applied.status().ToString());
    REQUIRE(applied.ok());
    CHECK(*applied);
  }
  auto kvs = client->GetPrefix(mxrun::EtcdStatePrefix("/mxrun/svc"));
  INFO(kvs.status().ToString());
  REQUIRE(kvs.ok());
  auto state = mxrun::ReadEtcdState("/mxrun/svc", *kvs);
  REQUIRE(state.ok());
  REQUIRE(state->runs.size() == 1);
  CHECK(state->runs[0].members.size() == 16384);
  CHECK(state->runs[0].members.back().desc.host == "gpu-node-16383.cluster.example.org");
  // Its lease ends (a paused leader): a write of the old leader is refused whole.
  REQUIRE(client->RevokeLease(*lease).ok());
  run.members.resize(1);
  for (const auto& txn : mxrun::PlanEtcdStateWrite("/mxrun/svc", 2, 1, {run})) {
    auto fenced = client->TxnIfCreated("/mxrun/svc/leader", **leader, txn);
    REQUIRE(fenced.ok());
    CHECK_FALSE(*fenced);
  }
  CHECK(mxrun::ReadEtcdState("/mxrun/svc", *client->GetPrefix(mxrun::EtcdStatePrefix("/mxrun/svc")))
            ->runs[0]
            .members.size() == 16384);
}
