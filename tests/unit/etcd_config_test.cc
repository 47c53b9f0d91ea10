// --rdzv_endpoint and the rdzv_conf TLS keys for an etcd rendezvous, as rendezvous/etcd_config.h
// reads them.

#include <catch2/catch.hpp>

#include "rendezvous/etcd_config.h"

TEST_CASE("etcd endpoints and TLS settings are validated", "[etcd_config]") {
  auto ok = mxrun::ParseEtcdConfig("10.0.0.1:2379, node2 ,[::1]:3000", "", "", "", "");
  REQUIRE(ok.ok());
  CHECK(ok->endpoints == std::vector<std::string>{"10.0.0.1:2379", "node2:2379", "[::1]:3000"});
  CHECK_FALSE(ok->tls);
  CHECK(mxrun::ParseEtcdConfig("a:1", "https", "/ca.pem", "", "")->tls);
  CHECK_THAT(std::string(mxrun::ParseEtcdConfig("", "", "", "", "").status().message()),
             Catch::Contains("names no etcd member"));
  CHECK_THAT(std::string(mxrun::ParseEtcdConfig("a:1", "udp", "", "", "").status().message()),
             Catch::Contains("protocol='udp'") && Catch::Contains("http or https"));
  CHECK_THAT(
      std::string(mxrun::ParseEtcdConfig("a:1", "http", "/ca.pem", "", "").status().message()),
      Catch::Contains("need protocol=https"));
  CHECK_THAT(
      std::string(mxrun::ParseEtcdConfig("a:1", "https", "", "/c.pem", "").status().message()),
      Catch::Contains("cert and key go together"));
  CHECK_THAT(std::string(mxrun::ParseEtcdConfig("a:99999", "", "", "", "").status().message()),
             Catch::Contains("a:99999"));
}
