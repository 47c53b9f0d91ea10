#include "rendezvous/etcd/etcd_leadership.h"

#include <cstdio>

#include "absl/strings/str_cat.h"
#include "rendezvous/etcd/etcd_master_store.h"

namespace mxrun {
namespace {

constexpr std::chrono::milliseconds kRetryPause{200};     // after an etcd error
constexpr std::chrono::milliseconds kWatchSlice{60'000};  // one watch; Shutdown cancels it

}  // namespace

absl::StatusOr<std::unique_ptr<EtcdMasterElection>> EtcdMasterElection::Start(
    EtcdElectionConfig config) {
  std::unique_ptr<EtcdMasterElection> election(new EtcdMasterElection(std::move(config)));
  absl::StatusOr<std::unique_ptr<EtcdClient>> watch = EtcdClient::Connect(election->config_.etcd);
  if (!watch.ok()) return watch.status();
  absl::StatusOr<std::unique_ptr<EtcdClient>> client = EtcdClient::Connect(election->config_.etcd);
  if (!client.ok()) return client.status();
  election->watch_client_ = std::move(*watch);
  election->client_ = std::move(*client);
  election->thread_ = std::thread([e = election.get()] { e->Loop(); });
  return election;
}

EtcdMasterElection::EtcdMasterElection(EtcdElectionConfig config) : config_(std::move(config)) {}

EtcdMasterElection::~EtcdMasterElection() { Shutdown(); }

void EtcdMasterElection::Shutdown(std::chrono::milliseconds grace) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (closing_) return;
    closing_ = true;
    grace_ = grace;
  }
  wake_.notify_all();
  if (watch_client_) watch_client_->Cancel();
  if (thread_.joinable()) thread_.join();
}

std::string EtcdMasterElection::Current() {
  std::lock_guard<std::mutex> lock(mutex_);
  return current_;
}

void EtcdMasterElection::Subscribe(std::function<void(const std::string&)> on_change) {
  std::lock_guard<std::mutex> lock(mutex_);
  on_change_ = std::move(on_change);
}

void EtcdMasterElection::Publish(const std::string& address) {
  // Called under no lock; the subscriber is called under mutex_ so that Subscribe({}) returning
  // means no call is running or will run.
  std::lock_guard<std::mutex> lock(mutex_);
  if (address == current_) return;
  current_ = address;
  if (on_change_) on_change_(address);
}

void EtcdMasterElection::Log(const std::string& line) {
  if (config_.log) {
    config_.log(line);
  } else {
    std::fprintf(stderr, "%s\n", line.c_str());
  }
}

bool EtcdMasterElection::Pause(std::chrono::milliseconds d) {
  std::unique_lock<std::mutex> lock(mutex_);
  wake_.wait_for(lock, d, [this] { return closing_; });
  return !closing_;
}

void EtcdMasterElection::Loop() {
  const std::string leader_key = config_.keys.leader();
  bool reported_error = false;
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (closing_) return;
    }
    absl::StatusOr<EtcdRead> read = watch_client_->Read(leader_key);
    if (!read.ok()) {
      if (absl::IsCancelled(read.status())) return;
      if (!reported_error)
        Log(absl::StrCat("etcd: cannot read ", leader_key, ": ", read.status().message(),
                         " (retrying)"));
      reported_error = true;
      if (!Pause(kRetryPause)) return;
      continue;
    }
    if (reported_error) Log("etcd: reachable again");
    reported_error = false;
    if (read->kv) {
      Publish(DecodeLeaderValue(read->kv->value).address);
    } else {
      Publish("");
      if (config_.candidate) {
        absl::StatusOr<int64_t> lease = client_->GrantLease(config_.lease_ttl);
        if (!lease.ok()) {
          if (!Pause(kRetryPause)) return;
          continue;
        }
        absl::StatusOr<std::optional<int64_t>> won =
            client_->CreateIfAbsent(leader_key, EncodeLeaderValue(config_.identity, ""), *lease);
        if (won.ok() && won->has_value()) {
          Lead(*lease, **won);
          continue;
        }
        (void)client_->RevokeLease(*lease);  // lost the race: someone else leads
        continue;
      }
    }
    absl::StatusOr<std::optional<int64_t>> changed =
        watch_client_->WaitForChange(leader_key, read->revision, kWatchSlice);
    if (!changed.ok() && absl::IsCancelled(changed.status())) return;
    if (!changed.ok() && !Pause(kRetryPause)) return;
  }
}

std::optional<std::vector<RunSnapshot>> EtcdMasterElection::SnapshotIfLeading() {
  std::lock_guard<std::mutex> lock(serving_mutex_);
  if (serving_ == nullptr) return std::nullopt;
  return serving_->Snapshot();
}

void EtcdMasterElection::Lead(int64_t lease, int64_t leader_rev) {
  const std::string leader_key = config_.keys.leader();
  const int term = ++terms_won_;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    deposed_ = false;
  }
  // Whose lease expired before this one won: its agent died (or was cut off) with that master.
  std::string previous;
  if (absl::StatusOr<std::optional<EtcdKeyValue>> last = client_->Get(config_.keys.last_leader());
      last.ok() && last->has_value()) {
    previous = (*last)->value;
  }
  auto store =
      std::make_unique<EtcdMasterStore>(client_, config_.keys.prefix, leader_key, leader_rev);
  absl::StatusOr<std::unique_ptr<MasterServer>> server =
      MasterServer::Start(config_.master, std::move(store), [this] {
        std::lock_guard<std::mutex> lock(mutex_);  // never held while the server is called
        deposed_ = true;
        wake_.notify_all();
      });
  if (!server.ok()) {
    Log(absl::StrCat("won the rendezvous master's election but cannot serve: ",
                     server.status().message()));
    (void)client_->RevokeLease(lease);
    Pause(std::chrono::seconds(1));
    return;
  }
  const std::string address = (*server)->address();
  {
    std::lock_guard<std::mutex> lock(serving_mutex_);
    serving_ = server->get();
  }
  if (!previous.empty() && previous != config_.identity) {
    (*server)->ForgetAgent(previous, "its agent held the expired master lease");
  }
  // Announce: the address in the leader key (a put keeps its creation revision, so the fence
  // stands) and this process as the latest leader, in one fenced transaction.
  bool announced = false;
  bool lost = false;
  while (!announced && !lost) {
    absl::StatusOr<bool> put = client_->TxnIfCreated(
        leader_key, leader_rev,
        {EtcdOp{EtcdOp::Kind::kPut, leader_key, EncodeLeaderValue(config_.identity, address),
                lease},
         EtcdOp{EtcdOp::Kind::kPut, config_.keys.last_leader(), config_.identity}});
    if (put.ok()) {
      announced = *put;
      lost = !*put;
    } else if (!Pause(kRetryPause)) {
      lost = true;
    }
  }
  if (announced) {
    Log(absl::StrCat("rendezvous master elected in etcd (", config_.keys.prefix, "): serving on ",
                     address, ", term ", term));
    Publish(address);
  }
  // Keep the lease alive until it ends, a write is refused, or Shutdown.
  const auto interval =
      std::chrono::duration_cast<std::chrono::milliseconds>(config_.lease_ttl) / 3;
  std::string why = lost ? "the leadership ended before it was announced" : "";
  bool closing = false;
  while (why.empty()) {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait_for(lock, interval, [this] { return closing_ || deposed_; });
      if (closing_) {
        closing = true;
        break;
      }
      if (deposed_) {
        why = "another master took over (a fenced write was refused)";
        break;
      }
    }
    absl::StatusOr<int64_t> ttl = client_->KeepAlive(lease);
    if (ttl.ok() && *ttl <= 0) why = "its etcd lease expired (paused or cut off too long)";
    // An error: etcd unreachable. The lease cannot expire there either; keep trying.
  }
  std::chrono::milliseconds grace;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    grace = grace_;
  }
  {
    std::lock_guard<std::mutex> lock(serving_mutex_);
    serving_ = nullptr;
  }
  (*server)->Shutdown(closing ? grace : std::chrono::milliseconds(0));
  server->reset();
  if (closing) {
    (void)client_->RevokeLease(lease);  // the successor need not wait for the TTL
    Publish("");
    return;
  }
  Log(absl::StrCat("no longer the rendezvous master (", why, ")"));
  Publish("");
}

}  // namespace mxrun
