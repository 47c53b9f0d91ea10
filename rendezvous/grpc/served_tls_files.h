#pragma once
// The certificate files a long-lived master serves: the operator's files as last verified
// (tls_verify.h), held in memory files (memfd) that gRPC's file watcher reads through
// /proc/self/fd/N. Replacing the files on disk changes nothing until a reload (mxrun-master's
// SIGHUP) verifies them and swaps each memory file in with dup2(), which is atomic. So a bad
// rotation (a key that does not belong to the certificate, a certificate of another CA, a file cut
// short) is refused with the reason and the previous certificates stay in service, instead of
// every new handshake failing until someone notices; and no copy of the key is ever written to a
// disk, nor left behind by a killed process.

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/tls_files.h"

namespace mxrun {

class ServedTlsFiles {
 public:
  // Verifies `source` and loads it. Errors name the file and what is wrong with it.
  static absl::StatusOr<std::unique_ptr<ServedTlsFiles>> Load(const TlsFiles& source);
  ~ServedTlsFiles();
  ServedTlsFiles(const ServedTlsFiles&) = delete;
  ServedTlsFiles& operator=(const ServedTlsFiles&) = delete;

  // The paths to hand gRPC (and the metrics' TLS): /proc/self/fd/N, in this process only.
  const TlsFiles& served() const { return served_; }
  // Verifies the source files again; when they pass, they are served from now on (gRPC takes them
  // for new handshakes at its next read); otherwise the previous ones stay, and the status says
  // why.
  absl::Status Reload();

 private:
  explicit ServedTlsFiles(TlsFiles source) : source_(std::move(source)) {}
  absl::Status Fill(bool replace);

  TlsFiles source_;
  TlsFiles served_;
  int fds_[3] = {-1, -1, -1};  // cert, key, cacert
};

}  // namespace mxrun
