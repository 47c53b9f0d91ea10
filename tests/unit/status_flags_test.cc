#include <catch2/catch.hpp>

#include <fstream>

#include "launcher/network/status_flags.h"
#include "tests/temp_dir.h"

namespace {

absl::StatusOr<mxrun::StatusFlagsResult> Resolve(std::vector<std::string> args,
                                                 std::map<std::string, std::string> env = {}) {
  std::vector<const char*> argv = {"mxrun", "status"};
  for (const std::string& arg : args) argv.push_back(arg.c_str());
  return mxrun::ResolveStatusFlags(static_cast<int>(argv.size()), argv.data(), env);
}

std::string Error(std::vector<std::string> args, std::map<std::string, std::string> env = {}) {
  auto resolved = Resolve(std::move(args), std::move(env));
  return resolved.ok() ? "no error" : std::string(resolved.status().message());
}

}  // namespace

TEST_CASE("mxrun status finds the master as the job does: its flags, variables and file",
          "[status_flags]") {
  auto flagged = Resolve({"--rdzv_endpoint=h:1", "--rdzv-id", "j", "--json", "--watch"});
  REQUIRE(flagged.ok());
  REQUIRE(flagged->flags);
  CHECK(flagged->flags->endpoint == "h:1");
  CHECK(flagged->flags->run_id == "j");
  CHECK(flagged->flags->json);
  CHECK(flagged->flags->watch_s == 2.0);  // --watch alone: every 2 s
  CHECK_FALSE(Resolve({"--rdzv_endpoint=h:1"})->flags->watch_s);
  CHECK(Resolve({"--rdzv_endpoint=h:1", "--watch=0.5"})->flags->watch_s == 0.5);

  // The job's environment, as torchrun's PET_* or mxrun's own.
  auto from_env = Resolve({}, {{"PET_RDZV_ENDPOINT", "h:2"}, {"MXRUN_RDZV_BACKEND", "etcd"}});
  REQUIRE(from_env.ok());
  CHECK(from_env->flags->endpoint == "h:2");
  CHECK(from_env->flags->etcd);

  // The job's own configuration file: its launch settings are not status's, and are ignored.
  mxrun::testing::TempDir dir;
  const std::string path = dir.path() + "/job.toml";
  std::ofstream(path)
      << "nnodes = \"2:4\"\nrdzv_backend = \"c10d\"\nrdzv_endpoint = \"h:3\"\n"
         "rdzv_id = \"job7\"\nentrypoint = \"train\"\nargs = [\"--epochs\", \"1\"]\n";
  auto from_file = Resolve({"--config", path});
  REQUIRE(from_file.ok());
  CHECK(from_file->flags->endpoint == "h:3");
  CHECK(from_file->flags->run_id == "job7");
  std::ofstream(path) << "rdzv_endpoint = \"h:3\"\nnprocs = 2\n";
  CHECK_THAT(Error({"--config", path}), Catch::Contains(":2: unknown key 'nprocs'"));
}

TEST_CASE("mxrun status's bad settings are clear errors", "[status_flags]") {
  CHECK_THAT(Error({}), Catch::Contains("--rdzv_endpoint is required"));
  CHECK_THAT(Error({"--rdzv_endpoint=h", "--rdzv_backend=static"}),
             Catch::Contains("--rdzv_backend='static' is not valid") &&
                 Catch::Contains("c10d, etcd, etcd-v2"));
  CHECK_THAT(Error({"--rdzv_endpoint=h", "--timeout=0"}), Catch::Contains("seconds above 0"));
  CHECK_THAT(Error({"--rdzv_endpoint=h", "--watch=0.01"}),
             Catch::Contains("--watch='0.01' is not valid: out of range"));
  CHECK_THAT(Error({"--rdzv_endpoint=h", "extra"}), Catch::Contains("extra"));
  auto printed = Resolve({"--print-config"}, {{"MXRUN_RDZV_ENDPOINT", "h:9"}});
  REQUIRE(printed.ok());
  CHECK_THAT(printed->text, Catch::Contains("rdzv_endpoint = \"h:9\"  # MXRUN_RDZV_ENDPOINT"));
}
