#include "rendezvous/master_server/store_service.h"

#include <atomic>
#include <cmath>
#include <utility>
#include <vector>

#include <grpc/support/time.h>
#include <grpcpp/alarm.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "rendezvous/grpc/grpc_status.h"
#include "rendezvous/wire/validation.h"

namespace mxrun {
namespace {

// At most this many missing keys are named in a Wait's DEADLINE_EXCEEDED message, each cut to
// kMissingKeyChars characters, so the status stays far below gRPC's metadata limit.
constexpr size_t kMissingKeysNamed = 8;
constexpr size_t kMissingKeyChars = 64;

grpc::ServerUnaryReactor* Reply(grpc::CallbackServerContext* context, const absl::Status& status) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(ToGrpcStatus(status));
  return reactor;
}

absl::Status ValidateKeyList(const google::protobuf::RepeatedPtrField<std::string>& keys) {
  if (static_cast<size_t>(keys.size()) > kMaxKeysPerRun) {
    return absl::InvalidArgumentError(
        absl::StrCat(keys.size(), " keys in one call; accepted: at most ", kMaxKeysPerRun));
  }
  for (const std::string& key : keys) {
    if (absl::Status status = ValidateKey(key); !status.ok()) return status;
  }
  return absl::OkStatus();
}

absl::Status ValidateWaitTimeout(double timeout_s) {
  if (timeout_s > 0 && timeout_s <= kMaxWaitTimeoutS) return absl::OkStatus();  // false for NaN
  return absl::InvalidArgumentError(absl::StrCat("wait timeout_s ", timeout_s,
                                                 " is not valid; accepted: more than 0, at most ",
                                                 kMaxWaitTimeoutS));
}

std::string MissingKeysMessage(double timeout_s, size_t keys_named,
                               const std::vector<std::string>& missing) {
  std::vector<std::string> shown;
  for (size_t i = 0; i < missing.size() && i < kMissingKeysNamed; ++i) {
    shown.push_back(missing[i].size() > kMissingKeyChars
                        ? absl::StrCat(missing[i].substr(0, kMissingKeyChars), "...")
                        : missing[i]);
  }
  std::string more = missing.size() > shown.size()
                         ? absl::StrCat(" and ", missing.size() - shown.size(), " more")
                         : std::string();
  return absl::StrCat("wait timed out after ", timeout_s, " s; ", missing.size(), " of ",
                      keys_named, " keys missing: '", absl::StrJoin(shown, "', '"), "'", more);
}

// One pending Wait. Three parties may finish it: the store (every key exists), the alarm (the
// timeout passed) and gRPC (OnCancel). The first to claim `finished_` calls Finish and withdraws
// the others where it can. The reactor deletes itself when gRPC (OnDone), the store waiter
// (callback run, or cancelled before running) and the alarm (callback run, if it was armed) have
// all let go of it.
class WaitReactor final : public grpc::ServerUnaryReactor {
 public:
  WaitReactor(MemoryStore& store, std::string run_id, std::vector<std::string> keys,
              double timeout_s)
      : store_(store), run_id_(std::move(run_id)), keys_(std::move(keys)), timeout_s_(timeout_s) {}

  // Called once, by the handler, before it returns the reactor to gRPC.
  void Start() {
    // handle_ is written before the alarm is armed and before gRPC can call OnCancel, the two
    // readers. The store's callback does not read it.
    handle_ = store_.AddWaiter(run_id_, keys_, [this] { OnKeysReady(); });
    const gpr_timespec deadline =
        gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC),
                     gpr_time_from_micros(std::llround(timeout_s_ * 1e6), GPR_TIMESPAN));
    absl::MutexLock lock(&alarm_mu_);
    if (finished_.load(std::memory_order_acquire)) return;  // the keys were there: no alarm
    refs_.fetch_add(1, std::memory_order_relaxed);
    alarm_.Set(deadline, [this](bool fired) { OnAlarm(fired); });
  }

  void OnCancel() override {
    if (!Claim()) return;
    const bool waiter_cancelled = store_.CancelWaiter(handle_);
    CancelAlarm();
    Finish(grpc::Status(grpc::StatusCode::CANCELLED, "wait cancelled by the client"));
    if (waiter_cancelled) Unref();
  }

  void OnDone() override { Unref(); }

 private:
  bool Claim() { return !finished_.exchange(true, std::memory_order_acq_rel); }

  void OnKeysReady() {
    if (Claim()) {
      CancelAlarm();
      Finish(grpc::Status::OK);
    }
    Unref();
  }

  void OnAlarm(bool fired) {
    if (fired && Claim()) {
      std::vector<std::string> missing;
      const bool waiter_cancelled = store_.CancelWaiter(handle_, &missing);
      if (waiter_cancelled) {
        Finish(grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED,
                            MissingKeysMessage(timeout_s_, keys_.size(), missing)));
        Unref();
      } else {
        // The last key arrived as the alarm fired; the store's callback lost the claim.
        Finish(grpc::Status::OK);
      }
    }
    Unref();
  }

  void CancelAlarm() {
    absl::MutexLock lock(&alarm_mu_);
    alarm_.Cancel();  // no effect when unarmed or already fired
  }

  void Unref() {
    if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
  }

  MemoryStore& store_;
  const std::string run_id_;
  const std::vector<std::string> keys_;
  const double timeout_s_;
  MemoryStore::WaitHandle handle_ = 0;
  std::atomic<bool> finished_{false};
  std::atomic<int> refs_{
      2};  // gRPC until OnDone, and the store waiter; +1 while the alarm is armed
  // grpc::Alarm's Set and Cancel may not race; its callback never runs inside either.
  absl::Mutex alarm_mu_;
  grpc::Alarm alarm_ ABSL_GUARDED_BY(alarm_mu_);
};

}  // namespace

StoreService::StoreService(MemoryStore& store, std::string token)
    : store_(store), token_(std::move(token)) {}

StoreService::~StoreService() = default;

absl::Status StoreService::CheckCall(grpc::CallbackServerContext* context,
                                     const std::string& run_id) const {
  if (absl::Status status = CheckToken(token_, PresentedToken(*context)); !status.ok()) {
    return status;
  }
  if (absl::Status valid = ValidateRunId(run_id); !valid.ok()) return valid;
  if (!only_run_id_.empty() && run_id != only_run_id_) {
    return absl::FailedPreconditionError(ForeignRunRefusal(only_run_id_, run_id));
  }
  return absl::OkStatus();
}

grpc::ServerUnaryReactor* StoreService::Set(grpc::CallbackServerContext* context,
                                            const mxrun::v1::SetRequest* request,
                                            mxrun::v1::SetReply* reply) {
  absl::Status status = CheckCall(context, request->run_id());
  if (status.ok()) status = ValidateKey(request->key());
  if (status.ok()) status = ValidateValue(request->value());
  if (status.ok()) status = store_.Set(request->run_id(), request->key(), request->value());
  return Reply(context, status);
}

grpc::ServerUnaryReactor* StoreService::Get(grpc::CallbackServerContext* context,
                                            const mxrun::v1::GetRequest* request,
                                            mxrun::v1::GetReply* reply) {
  absl::Status status = CheckCall(context, request->run_id());
  if (status.ok()) status = ValidateKey(request->key());
  if (status.ok()) {
    std::optional<std::string> value = store_.Get(request->run_id(), request->key());
    reply->set_found(value.has_value());
    if (value.has_value()) reply->set_value(std::move(*value));
  }
  return Reply(context, status);
}

grpc::ServerUnaryReactor* StoreService::Add(grpc::CallbackServerContext* context,
                                            const mxrun::v1::AddRequest* request,
                                            mxrun::v1::AddReply* reply) {
  absl::Status status = CheckCall(context, request->run_id());
  if (status.ok()) status = ValidateKey(request->key());
  if (status.ok()) {
    absl::StatusOr<int64_t> value = store_.Add(request->run_id(), request->key(), request->delta());
    if (value.ok()) reply->set_value(*value);
    status = value.status();
  }
  return Reply(context, status);
}

grpc::ServerUnaryReactor* StoreService::CompareSet(grpc::CallbackServerContext* context,
                                                   const mxrun::v1::CompareSetRequest* request,
                                                   mxrun::v1::CompareSetReply* reply) {
  absl::Status status = CheckCall(context, request->run_id());
  if (status.ok()) status = ValidateKey(request->key());
  if (status.ok()) status = ValidateValue(request->expected());
  if (status.ok()) status = ValidateValue(request->desired());
  if (status.ok()) {
    absl::StatusOr<MemoryStore::CompareSetResult> result =
        store_.CompareSet(request->run_id(), request->key(), request->expected(),
                          request->expect_absent(), request->desired());
    if (result.ok()) {
      reply->set_swapped(result->swapped);
      if (result->value.has_value()) reply->set_value(std::move(*result->value));
    }
    status = result.status();
  }
  return Reply(context, status);
}

grpc::ServerUnaryReactor* StoreService::Wait(grpc::CallbackServerContext* context,
                                             const mxrun::v1::WaitRequest* request,
                                             mxrun::v1::WaitReply* reply) {
  absl::Status status = CheckCall(context, request->run_id());
  if (status.ok()) status = ValidateKeyList(request->keys());
  if (status.ok()) status = ValidateWaitTimeout(request->timeout_s());
  if (!status.ok()) return Reply(context, status);
  auto* reactor =
      new WaitReactor(store_, request->run_id(),
                      std::vector<std::string>(request->keys().begin(), request->keys().end()),
                      request->timeout_s());
  reactor->Start();
  return reactor;
}

grpc::ServerUnaryReactor* StoreService::Delete(grpc::CallbackServerContext* context,
                                               const mxrun::v1::DeleteRequest* request,
                                               mxrun::v1::DeleteReply* reply) {
  absl::Status status = CheckCall(context, request->run_id());
  if (status.ok()) status = ValidateKey(request->key());
  if (status.ok()) reply->set_deleted(store_.Delete(request->run_id(), request->key()));
  return Reply(context, status);
}

grpc::ServerUnaryReactor* StoreService::MultiGet(grpc::CallbackServerContext* context,
                                                 const mxrun::v1::MultiGetRequest* request,
                                                 mxrun::v1::MultiGetReply* reply) {
  absl::Status status = CheckCall(context, request->run_id());
  if (status.ok()) status = ValidateKeyList(request->keys());
  if (status.ok()) {
    std::vector<std::optional<std::string>> values =
        store_.MultiGet(request->run_id(),
                        std::vector<std::string>(request->keys().begin(), request->keys().end()));
    for (std::optional<std::string>& value : values) {
      reply->add_found(value.has_value());
      reply->add_values(value.has_value() ? std::move(*value) : std::string());
    }
  }
  return Reply(context, status);
}

}  // namespace mxrun
