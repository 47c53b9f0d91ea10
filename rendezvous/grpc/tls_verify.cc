#include "rendezvous/grpc/tls_verify.h"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/files.h"

namespace mxrun {
namespace {

struct BioFree {
  void operator()(BIO* b) const { BIO_free(b); }
};
struct X509Free {
  void operator()(X509* x) const { X509_free(x); }
};
struct KeyFree {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
struct StoreFree {
  void operator()(X509_STORE* s) const { X509_STORE_free(s); }
};
struct StoreContextFree {
  void operator()(X509_STORE_CTX* c) const { X509_STORE_CTX_free(c); }
};
using Certificate = std::unique_ptr<X509, X509Free>;

// OpenSSL's last error, in words, and the queue emptied.
std::string OpenSslError() {
  const unsigned long code = ERR_get_error();
  ERR_clear_error();
  if (code == 0) return "no PEM block";
  char text[256];
  ERR_error_string_n(code, text, sizeof text);
  return text;
}

std::unique_ptr<BIO, BioFree> Memory(const std::string& text) {
  return std::unique_ptr<BIO, BioFree>(BIO_new_mem_buf(text.data(), static_cast<int>(text.size())));
}

// Every certificate of a PEM text, in order; none (and `why`) when the first does not parse.
std::vector<Certificate> ReadCertificates(const std::string& text, std::string& why) {
  std::vector<Certificate> certificates;
  auto bio = Memory(text);
  ERR_clear_error();
  while (X509* x = PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr)) {
    certificates.emplace_back(x);
  }
  why = certificates.empty()
            ? absl::StrCat("no certificate in it parses (", OpenSslError(), "; a file cut short?)")
            : "";
  ERR_clear_error();  // the end of the text reads as an error
  return certificates;
}

}  // namespace

absl::Status VerifyTlsFiles(const TlsFiles& files, absl::string_view where) {
  if (!files.enabled()) return absl::OkStatus();
  if (absl::Status markers = CheckTlsFiles(files, where.empty() ? "TLS" : where); !markers.ok()) {
    return markers;
  }
  auto bad = [&](const std::string& what) {
    return absl::InvalidArgumentError(where.empty() ? what : absl::StrCat(where, ": ", what));
  };
  const std::string cert_text = ReadWholeFile(files.cert).value_or("");
  const std::string key_text = ReadWholeFile(files.key).value_or("");
  const std::string ca_text = ReadWholeFile(files.cacert).value_or("");
  ERR_clear_error();
  std::string why;
  std::vector<Certificate> chain = ReadCertificates(cert_text, why);
  if (chain.empty()) return bad(absl::StrCat("cert=", files.cert, ": ", why));
  std::vector<Certificate> authorities = ReadCertificates(ca_text, why);
  if (authorities.empty()) return bad(absl::StrCat("cacert=", files.cacert, ": ", why));
  auto key_bio = Memory(key_text);
  std::unique_ptr<EVP_PKEY, KeyFree> key(
      PEM_read_bio_PrivateKey(key_bio.get(), nullptr, nullptr, nullptr));
  if (key == nullptr) {
    return bad(
        absl::StrCat("key=", files.key, ": no private key in it parses (", OpenSslError(), ")"));
  }
  if (X509_check_private_key(chain.front().get(), key.get()) != 1) {
    ERR_clear_error();
    return bad(absl::StrCat("key=", files.key, " does not belong to cert=", files.cert));
  }
  std::unique_ptr<X509_STORE, StoreFree> store(X509_STORE_new());
  for (const Certificate& authority : authorities)
    X509_STORE_add_cert(store.get(), authority.get());
  STACK_OF(X509)* intermediates = sk_X509_new_null();
  for (size_t i = 1; i < chain.size(); ++i) sk_X509_push(intermediates, chain[i].get());
  std::unique_ptr<X509_STORE_CTX, StoreContextFree> context(X509_STORE_CTX_new());
  X509_STORE_CTX_init(context.get(), store.get(), chain.front().get(), intermediates);
  const bool verified = X509_verify_cert(context.get()) == 1;
  const int error = X509_STORE_CTX_get_error(context.get());
  sk_X509_free(intermediates);  // the certificates themselves belong to `chain`
  ERR_clear_error();
  if (!verified) {
    return bad(absl::StrCat("cert=", files.cert, " does not verify against cacert=", files.cacert,
                            ": ", X509_verify_cert_error_string(error)));
  }
  return absl::OkStatus();
}

}  // namespace mxrun
