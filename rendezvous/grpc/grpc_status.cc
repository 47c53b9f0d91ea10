#include "rendezvous/grpc/grpc_status.h"

#include "rendezvous/wire/validation.h"

namespace mxrun {

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(status.message()));
}

absl::Status FromGrpcStatus(const grpc::Status& status) {
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()), status.error_message());
}

std::string PresentedToken(const grpc::CallbackServerContext& context) {
  const auto& metadata = context.client_metadata();
  auto it = metadata.find(kTokenMetadataKey);
  return it == metadata.end() ? std::string() : std::string(it->second.data(), it->second.size());
}

}  // namespace mxrun
