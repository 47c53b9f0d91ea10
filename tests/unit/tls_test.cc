// Mutual TLS's checks that need no network: the three files, and gRPC's handshake failures in
// plain words.

#include <catch2/catch.hpp>

#include <fstream>

#include "common/tls_files.h"
#include "rendezvous/grpc_logs.h"
#include "tests/temp_dir.h"

using mxrun::CheckTlsFiles;
using mxrun::TlsFiles;

TEST_CASE("TLS files: all three or none, each a PEM of its kind", "[tls]") {
  mxrun::testing::TempDir dir;
  const std::string cert = dir.path() + "/c.pem", key = dir.path() + "/k.pem";
  std::ofstream(cert) << "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
  std::ofstream(key) << "-----BEGIN PRIVATE KEY-----\nMIIE\n-----END PRIVATE KEY-----\n";
  CHECK(CheckTlsFiles({}, "--rdzv_conf").ok());
  CHECK(CheckTlsFiles({cert, key, cert}, "--rdzv_conf").ok());
  CHECK_THAT(std::string(CheckTlsFiles({cert, "", cert}, "--rdzv_conf").message()),
             Catch::Contains("--rdzv_conf: mutual TLS needs cert, key and cacert together; key is "
                             "missing"));
  CHECK_THAT(std::string(CheckTlsFiles({key, key, cert}, "x").message()),
             Catch::Contains("cert=" + key + " is not a PEM file with a certificate"));
  CHECK_THAT(std::string(CheckTlsFiles({cert, cert, cert}, "x").message()),
             Catch::Contains("is not a PEM file with a private key"));
  CHECK_THAT(std::string(CheckTlsFiles({cert, key, dir.path() + "/none"}, "x").message()),
             Catch::Contains("cacert=" + dir.path() + "/none cannot be read"));
}

TEST_CASE("gRPC's handshake failures in plain words", "[tls]") {
  using mxrun::DescribeTlsFailure;
  CHECK_FALSE(DescribeTlsFailure("Connection refused").has_value());
  CHECK_THAT(*DescribeTlsFailure("Handshake failed with fatal error SSL_ERROR_SSL: "
                                 "error:0A00010B:SSL routines::wrong version number."),
             Catch::Contains("does not speak TLS"));
  CHECK_THAT(*DescribeTlsFailure("Handshake failed with fatal error SSL_ERROR_SSL: error:"
                                 "0A000086:SSL routines::certificate verify failed."),
             Catch::Contains("not from the CA the other side trusts"));
  CHECK_THAT(*DescribeTlsFailure("Handshake failed with fatal error SSL_ERROR_SSL: error:"
                                 "0A0000C7:SSL routines::peer did not return a certificate."),
             Catch::Contains("presented no certificate"));
}
