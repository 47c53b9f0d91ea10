#pragma once
// What the handshake will find wrong with a set of TLS files, found before a handshake does
// (OpenSSL, which gRPC itself uses here): every PEM block parses, the key belongs to the
// certificate, and the certificate chains to the CA and is valid now. CheckTlsFiles
// (common/tls_files.h) only looks for the PEM markers, so that the `mxrun` binary stays free of
// OpenSSL; the processes that serve TLS (mxrun-master, an agent hosting the master) ask this too.

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "common/tls_files.h"

namespace mxrun {

// OK, or InvalidArgument naming the file and what is wrong with it ("key=P does not belong to
// cert=P", "cert=P does not verify against cacert=P: certificate has expired"), after `where: `
// (nothing when `where` is empty).
absl::Status VerifyTlsFiles(const TlsFiles& files, absl::string_view where);

}  // namespace mxrun
