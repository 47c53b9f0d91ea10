// Mutual TLS's checks that need no network: the three files, and gRPC's handshake failures in
// plain words.

#include <catch2/catch.hpp>

#include <fstream>

#include "common/tls_files.h"
#include "launcher/rendezvous_setup.h"
#include "rendezvous/grpc/grpc_logs.h"
#include "tests/temp_dir.h"
#include "tests/unit/parse_launch_args.h"

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

TEST_CASE(
    "the master's TLS files: cert, key, cacert with c10d, master_* with etcd, where "
    "cert, key, cacert are etcd's",
    "[tls]") {
  mxrun::testing::TempDir dir;
  const std::string cert = dir.path() + "/c.pem", key = dir.path() + "/k.pem";
  std::ofstream(cert) << "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
  std::ofstream(key) << "-----BEGIN PRIVATE KEY-----\nMIIE\n-----END PRIVATE KEY-----\n";
  const auto settings = [](const std::string& backend, const std::string& conf) {
    auto parsed = mxrun::testing::ParseLaunchArgs(
        {"--nnodes=2", "--no_python", "--rdzv_backend=" + backend, "--rdzv_endpoint=127.0.0.1:2379",
         "--rdzv_id=j", "--rdzv_conf=" + conf, "train"});
    REQUIRE(parsed.ok());
    return mxrun::CheckRendezvousFlags(*parsed->options, {});
  };
  const std::string files = "cert=" + cert + ",key=" + key + ",cacert=" + cert;
  auto c10d = settings("c10d", files);
  REQUIRE(c10d.ok());
  CHECK(c10d->tls.cert == cert);

  auto etcd = settings("etcd", "protocol=https," + files);  // etcd's own TLS only
  REQUIRE(etcd.ok());
  CHECK_FALSE(etcd->tls.enabled());
  CHECK(etcd->etcd.tls);
  CHECK(etcd->etcd.cert == cert);

  auto both =
      settings("etcd", "master_cert=" + cert + ",master_key=" + key + ",master_cacert=" + cert);
  REQUIRE(both.ok());
  CHECK(both->tls.key == key);
  CHECK_FALSE(both->etcd.tls);

  auto half = settings("etcd", "master_cert=" + cert);
  REQUIRE_FALSE(half.ok());
  CHECK_THAT(std::string(half.status().message()),
             Catch::Contains("master_cert/master_key/master_cacert: mutual TLS needs cert, key "
                             "and cacert together; key is missing"));
  auto wrong = settings("c10d", "master_cert=" + cert);
  REQUIRE_FALSE(wrong.ok());
  CHECK_THAT(std::string(wrong.status().message()),
             Catch::Contains("master_cert is for --rdzv_backend=etcd"));
}
