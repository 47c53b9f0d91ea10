#pragma once
// gRPC's own log lines, routed: they are noise for a launcher's user and go to `debug` (prefixed
// "error: " for gRPC's errors), except a
// failed TLS handshake, which becomes one line that says what is wrong and what to give (at most
// one every 10 s: a client retrying would repeat it several times a second). Used by the agent and
// by mxrun-master. GRPC_VERBOSITY set in the environment leaves gRPC's logging as it is.

#include <functional>
#include <optional>
#include <string>

namespace mxrun {

void RouteGrpcLogs(std::function<void(const std::string&)> warn,
                   std::function<void(const std::string&)> debug);

// The plain-words reading of a gRPC log message about a failed TLS handshake; nullopt for any
// other message. Pure.
std::optional<std::string> DescribeTlsFailure(const std::string& grpc_message);

}  // namespace mxrun
