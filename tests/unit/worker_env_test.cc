#include <catch2/catch.hpp>

#include <stdexcept>

#include "common/worker_env.h"

using mxrun::EnvMap;
using mxrun::ReadWorkerIdentity;

TEST_CASE("with no contract variables the trainer runs alone as rank 0 of 1", "[worker_env]") {
  auto id = ReadWorkerIdentity({{"PATH", "/bin"}});
  CHECK(id.Alone());
  CHECK(id.rank == 0);
  CHECK(id.world_size == 1);
}

TEST_CASE("torchrun's variables are read into the worker identity", "[worker_env]") {
  EnvMap env{{"RANK", "5"},
             {"WORLD_SIZE", "8"},
             {"LOCAL_RANK", "1"},
             {"LOCAL_WORLD_SIZE", "4"},
             {"MASTER_ADDR", "10.1.2.3"},
             {"MASTER_PORT", "29400"},
             {"TORCHELASTIC_RESTART_COUNT", "2"},
             {"TORCHELASTIC_USE_AGENT_STORE", "True"},
             {"TORCHELASTIC_ERROR_FILE", "/tmp/err.json"},
             {"TORCHELASTIC_RUN_ID", "job"}};
  auto id = ReadWorkerIdentity(env);
  CHECK(id.rank == 5);
  CHECK(id.world_size == 8);
  CHECK(id.local_rank == 1);
  CHECK(id.local_world_size == 4);
  CHECK(id.master_addr == "10.1.2.3");
  CHECK(id.master_port == 29400);
  CHECK(id.restart_count == 2);
  CHECK(id.use_agent_store);
  CHECK(id.error_file == "/tmp/err.json");
  CHECK(id.run_id == "job");
  CHECK_FALSE(id.Alone());
}

TEST_CASE("a broken contract names the variable and its value", "[worker_env]") {
  auto message = [](const EnvMap& env) {
    try {
      ReadWorkerIdentity(env);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK_THAT(message({{"RANK", "0"}}), Catch::Contains("RANK and WORLD_SIZE"));
  CHECK_THAT(
      message({{"RANK", "2"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "h"}, {"MASTER_PORT", "1"}}),
      Catch::Contains("RANK='2'"));
  CHECK_THAT(message({{"RANK", "0"}, {"WORLD_SIZE", "two"}}), Catch::Contains("WORLD_SIZE='two'"));
  CHECK_THAT(message({{"RANK", "0"}, {"WORLD_SIZE", "2"}}),
             Catch::Contains("needs MASTER_ADDR and MASTER_PORT"));
  CHECK_THAT(
      message({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "h"}, {"MASTER_PORT", "70000"}}),
      Catch::Contains("MASTER_PORT='70000'"));
}
