#include "common/http/tls/http_tls.h"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <poll.h>

#include "absl/strings/str_cat.h"

namespace mxrun {
namespace {

std::string OpenSslError() {
  const unsigned long code = ERR_get_error();
  if (code == 0) return "unknown error";
  char text[256];
  ERR_error_string_n(code, text, sizeof text);
  return text;
}

class OpenSslConnection : public TlsConnection {
 public:
  OpenSslConnection(SSL* ssl, int fd) : ssl_(ssl), fd_(fd) {}
  ~OpenSslConnection() override {
    SSL_shutdown(ssl_);
    SSL_free(ssl_);
    ERR_clear_error();
  }
  long Read(char* buffer, size_t size, HttpClock::time_point deadline) override {
    for (;;) {
      const int n = SSL_read(ssl_, buffer, static_cast<int>(size));
      if (n > 0) return n;
      if (SSL_get_error(ssl_, n) == SSL_ERROR_ZERO_RETURN) return 0;
      if (!Retry(n, deadline)) return -1;
    }
  }
  bool Write(std::string_view data, HttpClock::time_point deadline) override {
    while (!data.empty()) {
      const int n = SSL_write(ssl_, data.data(), static_cast<int>(data.size()));
      if (n > 0) {
        data.remove_prefix(static_cast<size_t>(n));
      } else if (!Retry(n, deadline)) {
        return false;
      }
    }
    return true;
  }
  // After an SSL call returned `rc` <= 0: waits for what it needs; false when it cannot go on.
  bool Retry(int rc, HttpClock::time_point deadline) {
    const int error = SSL_get_error(ssl_, rc);
    if (error == SSL_ERROR_WANT_READ) return WaitForFd(fd_, POLLIN, deadline);
    if (error == SSL_ERROR_WANT_WRITE) return WaitForFd(fd_, POLLOUT, deadline);
    return false;
  }

 private:
  SSL* ssl_;
  int fd_;
};

class OpenSslAcceptor : public TlsAcceptor {
 public:
  explicit OpenSslAcceptor(SSL_CTX* context) : context_(context) {}
  ~OpenSslAcceptor() override { SSL_CTX_free(context_); }
  std::unique_ptr<TlsConnection> Accept(int fd, HttpClock::time_point deadline) override {
    SSL* ssl = SSL_new(context_);
    if (ssl == nullptr) return nullptr;
    SSL_set_fd(ssl, fd);
    auto connection = std::make_unique<OpenSslConnection>(ssl, fd);
    int rc;
    while ((rc = SSL_accept(ssl)) <= 0) {
      if (!connection->Retry(rc, deadline)) return nullptr;  // frees the session
    }
    return connection;
  }

 private:
  SSL_CTX* context_;
};

}  // namespace

absl::StatusOr<std::shared_ptr<TlsAcceptor>> MakeTlsAcceptor(const TlsFiles& files,
                                                             const std::string& who) {
  if (absl::Status checked = CheckTlsFiles(files, who); !checked.ok()) return checked;
  SSL_CTX* context = SSL_CTX_new(TLS_server_method());
  if (context == nullptr) {
    return absl::InternalError(
        absl::StrCat(who, ": cannot create a TLS context: ", OpenSslError()));
  }
  auto acceptor = std::make_shared<OpenSslAcceptor>(context);  // frees the context from here
  SSL_CTX_set_min_proto_version(context, TLS1_2_VERSION);
  if (SSL_CTX_use_certificate_chain_file(context, files.cert.c_str()) != 1 ||
      SSL_CTX_use_PrivateKey_file(context, files.key.c_str(), SSL_FILETYPE_PEM) != 1 ||
      SSL_CTX_check_private_key(context) != 1) {
    return absl::InvalidArgumentError(absl::StrCat(who, ": cannot use certificate '", files.cert,
                                                   "' with key '", files.key,
                                                   "': ", OpenSslError()));
  }
  if (SSL_CTX_load_verify_locations(context, files.cacert.c_str(), nullptr) != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(who, ": cannot load CA '", files.cacert, "': ", OpenSslError()));
  }
  // Mutual TLS, as the job's gRPC: a client without a certificate from the job's CA is refused.
  SSL_CTX_set_verify(context, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
  return std::shared_ptr<TlsAcceptor>(std::move(acceptor));
}

}  // namespace mxrun
