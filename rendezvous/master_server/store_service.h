#pragma once
// StoreService: the gRPC face of a MemoryStore (service mxrun.v1.Store in proto/mxrun.proto).
//
// A thin adapter. Every RPC: check the token (metadata "x-mxrun-token", UNAUTHENTICATED), validate
// the request with validation.h (INVALID_ARGUMENT), call the store, and return the store's status
// with the same code and message.
//
// Wait never occupies a gRPC thread. It registers a store waiter and arms a grpc::Alarm for
// `timeout_s` (which must be > 0 and <= kMaxWaitTimeoutS), then finishes with whichever comes
// first:
//   every key exists          -> OK
//   the timeout passes        -> DEADLINE_EXCEEDED, naming the keys still missing
//   the client cancels (or its own deadline passes, or the server shuts down) -> CANCELLED
// The losers are withdrawn: the waiter is cancelled in the store and the alarm is cancelled.
//
// Lifetime: the store and the service must outlive the grpc::Server they are registered with
// (shut it down, with a deadline if Waits may be pending, before destroying either). A Wait's
// state lives in its reactor, which frees itself once gRPC, the alarm and the store are all done
// with it; the service holds none of it, so destroying it after the server is always clean.
//
// Thread-safety: gRPC calls the handlers on its own threads; the service holds no mutable state.

#include <string>

#include "mxrun.grpc.pb.h"
#include "mxrun.pb.h"
#include "rendezvous/master_server/memory_store.h"

namespace mxrun {

// The longest Wait a client may ask for, in seconds.
inline constexpr double kMaxWaitTimeoutS = 3600;

class StoreService final : public mxrun::v1::Store::CallbackService {
 public:
  // `token` empty: no token is required.
  StoreService(MemoryStore& store, std::string token);
  StoreService(const StoreService&) = delete;
  StoreService& operator=(const StoreService&) = delete;
  ~StoreService() override;
  // Serves the keys of run `run_id` only (call before serving; RendezvousService::ServeOnlyRun):
  // a request for another run fails with FailedPrecondition.
  void ServeOnlyRun(std::string run_id) { only_run_id_ = std::move(run_id); }

  grpc::ServerUnaryReactor* Set(grpc::CallbackServerContext* context,
                                const mxrun::v1::SetRequest* request,
                                mxrun::v1::SetReply* reply) override;
  grpc::ServerUnaryReactor* Get(grpc::CallbackServerContext* context,
                                const mxrun::v1::GetRequest* request,
                                mxrun::v1::GetReply* reply) override;
  grpc::ServerUnaryReactor* Add(grpc::CallbackServerContext* context,
                                const mxrun::v1::AddRequest* request,
                                mxrun::v1::AddReply* reply) override;
  grpc::ServerUnaryReactor* CompareSet(grpc::CallbackServerContext* context,
                                       const mxrun::v1::CompareSetRequest* request,
                                       mxrun::v1::CompareSetReply* reply) override;
  grpc::ServerUnaryReactor* Wait(grpc::CallbackServerContext* context,
                                 const mxrun::v1::WaitRequest* request,
                                 mxrun::v1::WaitReply* reply) override;
  grpc::ServerUnaryReactor* Delete(grpc::CallbackServerContext* context,
                                   const mxrun::v1::DeleteRequest* request,
                                   mxrun::v1::DeleteReply* reply) override;
  grpc::ServerUnaryReactor* MultiGet(grpc::CallbackServerContext* context,
                                     const mxrun::v1::MultiGetRequest* request,
                                     mxrun::v1::MultiGetReply* reply) override;

 private:
  // Token, then run id: the checks every RPC starts with.
  absl::Status CheckCall(grpc::CallbackServerContext* context, const std::string& run_id) const;

  MemoryStore& store_;
  const std::string token_;
  std::string only_run_id_;  // empty: any run
};

}  // namespace mxrun
