#pragma once
// HTTPS for common/http/http_server with the job's certificates (OpenSSL): the server presents
// `cert` and `key`, and demands of every client a certificate signed by `cacert` (mutual TLS,
// as the job's gRPC). A library of its own (mxrun_metrics_tls), so that only the binaries that
// serve HTTPS load OpenSSL.

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/http/http_server.h"
#include "common/tls_files.h"

namespace mxrun {

// Errors (InvalidArgument) name the file that cannot be used, and why.
absl::StatusOr<std::shared_ptr<TlsAcceptor>> MakeTlsAcceptor(const TlsFiles& files,
                                                             const std::string& who);

}  // namespace mxrun
