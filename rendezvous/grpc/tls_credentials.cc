#include "rendezvous/grpc/tls_credentials.h"

#include <optional>
#include <string>

#include "common/files.h"
#include "grpcpp/security/tls_certificate_provider.h"
#include "grpcpp/security/tls_credentials_options.h"

namespace mxrun {

std::shared_ptr<grpc::ChannelCredentials> ClientCredentials(const TlsFiles& files) {
  if (!files.enabled()) return grpc::InsecureChannelCredentials();
  grpc::SslCredentialsOptions ssl;
  // Checked by CheckTlsFiles before any connection is made; a file gone since is an empty PEM,
  // which fails the handshake with gRPC's own message.
  ssl.pem_root_certs = ReadWholeFile(files.cacert).value_or("");
  ssl.pem_cert_chain = ReadWholeFile(files.cert).value_or("");
  ssl.pem_private_key = ReadWholeFile(files.key).value_or("");
  return grpc::SslCredentials(ssl);
}

std::shared_ptr<grpc::ServerCredentials> ServerCredentials(const TlsFiles& files) {
  if (!files.enabled()) return grpc::InsecureServerCredentials();
  auto provider = std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(
      files.key, files.cert, files.cacert, kTlsRefreshSeconds);
  grpc::experimental::TlsServerCredentialsOptions options(provider);
  options.watch_root_certs();
  options.watch_identity_key_cert_pairs();
  // Mutual: a client without a certificate from the CA is refused in the handshake.
  options.set_cert_request_type(GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  return grpc::experimental::TlsServerCredentials(options);
}

}  // namespace mxrun
