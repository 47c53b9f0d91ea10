#pragma once
// gRPC credentials for mxrun's own connections from TlsFiles (common/tls_files.h): plaintext when
// no files are given, else mutual TLS in which both sides verify the other's certificate against
// the job's CA (and the client also the server's name). The master watches its files: a
// certificate or CA replaced on disk (atomically: write beside, then rename) is used for new
// handshakes within a second, and established sessions go on undisturbed; `mxrun-master` checks
// the new files at once on SIGHUP and says whether they are usable.

#include <memory>

#include "common/tls_files.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/security/server_credentials.h"

namespace mxrun {

// How often the master re-reads its certificate files.
inline constexpr unsigned kTlsRefreshSeconds = 1;

std::shared_ptr<grpc::ChannelCredentials> ClientCredentials(const TlsFiles& files);
std::shared_ptr<grpc::ServerCredentials> ServerCredentials(const TlsFiles& files);

}  // namespace mxrun
