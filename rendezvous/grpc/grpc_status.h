#pragma once
// gRPC glue shared by the master's services and the agent's client: statuses both ways, and the
// token a call presented.

#include <string>

#include <grpcpp/grpcpp.h>

#include "absl/status/status.h"

namespace mxrun {

// absl and gRPC number the canonical codes alike: the code and message carry over unchanged.
grpc::Status ToGrpcStatus(const absl::Status& status);
absl::Status FromGrpcStatus(const grpc::Status& status);

// The token a client presented (metadata kTokenMetadataKey), empty when none.
std::string PresentedToken(const grpc::CallbackServerContext& context);

}  // namespace mxrun
