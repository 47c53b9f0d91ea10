#include <catch2/catch.hpp>

#include <fstream>

#include "launcher/master/master_flags.h"
#include "tests/temp_dir.h"

namespace {

absl::StatusOr<mxrun::MasterFlagsResult> Resolve(std::vector<std::string> args,
                                                 std::map<std::string, std::string> env = {}) {
  std::vector<const char*> argv = {"mxrun-master"};
  for (const std::string& arg : args) argv.push_back(arg.c_str());
  return mxrun::ResolveMasterFlags(static_cast<int>(argv.size()), argv.data(), env);
}

mxrun::MasterFlags Ok(std::vector<std::string> args, std::map<std::string, std::string> env = {}) {
  auto resolved = Resolve(std::move(args), std::move(env));
  if (!resolved.ok()) FAIL(resolved.status().message());
  REQUIRE(resolved->flags.has_value());
  return *resolved->flags;
}

std::string Error(std::vector<std::string> args, std::map<std::string, std::string> env = {}) {
  auto resolved = Resolve(std::move(args), std::move(env));
  return resolved.ok() ? "no error" : std::string(resolved.status().message());
}

}  // namespace

TEST_CASE("mxrun-master's defaults and flags", "[master_flags]") {
  mxrun::MasterFlags defaults = Ok({});
  CHECK(defaults.server.host == "127.0.0.1");
  CHECK(defaults.server.port == 29400);
  CHECK(defaults.metrics_port == 29401);
  CHECK_FALSE(defaults.election);
  // A free rendezvous port: a free metrics port, so that ephemeral masters never contend.
  CHECK(Ok({"--port=0"}).metrics_port == 0);
  CHECK(Ok({"--metrics-port", "off"}).metrics_port == -1);
  mxrun::MasterFlags given = Ok({"--host=0.0.0.0", "--bind-all", "--state_dir=/tmp/s"});
  CHECK(given.server.bind_all);
  CHECK(given.server.state_dir == "/tmp/s");
}

TEST_CASE("mxrun-master reads MXRUN_MASTER_* and a config file below its flags", "[master_flags]") {
  CHECK(Ok({}, {{"MXRUN_MASTER_PORT", "29555"}}).server.port == 29555);
  CHECK(Ok({"--port=29556"}, {{"MXRUN_MASTER_PORT", "29555"}}).server.port == 29556);
  CHECK(Ok({}, {{"MXRUN_MASTER_METRICS_PORT", "off"}}).metrics_port == -1);
  mxrun::testing::TempDir dir;
  const std::string path = dir.path() + "/master.toml";
  std::ofstream(path) << "port = 29600\nstate_dir = \"/var/lib/mxrun\"\n";
  mxrun::MasterFlags from_file = Ok({"--config", path});
  CHECK(from_file.server.port == 29600);
  CHECK(from_file.server.state_dir == "/var/lib/mxrun");
  CHECK(Ok({"--config", path}, {{"MXRUN_MASTER_PORT", "29601"}}).server.port == 29601);
  // --print-config shows each value's source, as mxrun's does.
  auto printed = Resolve({"--config", path, "--print-config", "--bind_all"});
  REQUIRE(printed.ok());
  CHECK_FALSE(printed->flags);
  CHECK_THAT(printed->text, Catch::Contains("port = \"29600\"  # " + path + ":1: port"));
  CHECK_THAT(printed->text, Catch::Contains("bind_all = true  # --bind_all"));
  CHECK_THAT(printed->text, Catch::Contains("host = \"127.0.0.1\"  # default"));
  std::ofstream(path) << "entrypoint = \"train\"\n";
  CHECK_THAT(Error({"--config", path}), Catch::Contains(":1: unknown key 'entrypoint'"));
}

TEST_CASE("mxrun-master's bad settings name the flag, its source and what is accepted",
          "[master_flags]") {
  CHECK_THAT(Error({"--port=70000"}), Catch::Contains("--port='70000' is not valid: out of range"));
  CHECK_THAT(Error({}, {{"MXRUN_MASTER_METRICS_PORT", "x"}}),
             Catch::Contains("MXRUN_MASTER_METRICS_PORT='x' is not valid"));
  CHECK_THAT(Error({"--rdzv_backend=zookeeper"}), Catch::Contains("accepted: etcd, etcd-v2"));
  CHECK_THAT(Error({"--rdzv_endpoint=h:2379"}), Catch::Contains("need --rdzv_backend=etcd"));
  CHECK_THAT(Error({"--metrics_tls"}), Catch::Contains("--metrics_tls needs --cert"));
  CHECK_THAT(Error({"--rdzv_backend=etcd", "--rdzv_endpoint=h:2379", "--state_dir=/s"}),
             Catch::Contains("go not together"));
  CHECK_THAT(Error({"--rdzv_backend=etcd", "--rdzv_endpoint=h:2379", "--rdzv_conf=ttl=3"}),
             Catch::Contains("--rdzv_conf key 'ttl' is not known"));
  CHECK_THAT(Error({"stray"}), Catch::Contains("stray"));
  // etcd replicas take a free port unless one is given.
  mxrun::MasterFlags etcd = Ok({"--rdzv_backend=etcd-v2", "--rdzv_endpoint=h:2379"});
  REQUIRE(etcd.election);
  CHECK(etcd.server.port == 0);
  CHECK(etcd.metrics_port == 0);
}
