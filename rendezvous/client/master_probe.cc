#include "rendezvous/client/master_probe.h"

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"

#include <grpcpp/grpcpp.h>

#include "mxrun.grpc.pb.h"
#include "rendezvous/grpc/grpc_status.h"
#include "rendezvous/grpc/tls_credentials.h"
#include "rendezvous/wire/validation.h"

namespace mxrun {

absl::StatusOr<std::string> ServedRun(const std::string& address, const std::string& token,
                                      const TlsFiles& tls, std::chrono::milliseconds timeout) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);  // one throwaway connection per probe
  std::unique_ptr<v1::Rendezvous::Stub> stub =
      v1::Rendezvous::NewStub(grpc::CreateCustomChannel(address, ClientCredentials(tls), args));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + timeout);
  if (!token.empty()) context.AddMetadata(kTokenMetadataKey, token);
  v1::StatusRequest request;
  request.set_run_id("mxrun-probe");  // any valid id: the reply's runs are not read
  v1::StatusReply reply;
  grpc::Status status = stub->GetStatus(&context, request, &reply);
  if (!status.ok()) return FromGrpcStatus(status);
  return reply.serves_only_run_id();
}

absl::Status CheckListenerIsMaster(const std::string& address, const std::string& token,
                                   const TlsFiles& tls, std::chrono::milliseconds timeout) {
  absl::StatusOr<std::string> served = ServedRun(address, token, tls, timeout);
  // A master that refuses this agent's token still is one: the join then says so.
  if (served.ok() || absl::IsPermissionDenied(served.status()) ||
      absl::IsUnauthenticated(served.status())) {
    return absl::OkStatus();
  }
  return absl::UnavailableError(
      absl::StrCat("the rendezvous endpoint ", address,
                   " is taken by a program that is not an mxrun "
                   "rendezvous master (it did not answer as one within ",
                   absl::FormatDuration(absl::FromChrono(timeout)), ": ", served.status().message(),
                   "); stop that program or give --rdzv_endpoint a free port"));
}

std::string ProbingMasterLocator::Current() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!found_.empty()) return found_;
  const auto now = std::chrono::steady_clock::now();
  if (now < next_pass_) return "";
  for (const std::string& candidate : config_.candidates) {
    absl::StatusOr<std::string> served =
        ServedRun(candidate, config_.token, config_.tls, config_.probe_timeout);
    if (served.ok() && *served == config_.run_id) {
      found_ = candidate;
      return found_;
    }
  }
  next_pass_ = std::chrono::steady_clock::now() + config_.probe_interval;
  return "";
}

}  // namespace mxrun
