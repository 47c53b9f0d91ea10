// A rank's environment (agent/workers/rank_env.h): pure, so checked here without processes.
#include <catch2/catch.hpp>

#include "agent/workers/rank_env.h"

namespace {

mxrun::WorkerSpec Spec() {
  mxrun::WorkerSpec spec;
  spec.base_env = {
      {"PATH", "/usr/bin"}, {"RANK", "7"}, {"MXRUN_RDZV_TOKEN", "secret"}, {"KEEP", "me"}};
  spec.host_name = "node-a";
  spec.role = "trainer";
  return spec;
}

mxrun::RoundAssignment Round() {
  mxrun::RoundAssignment round;
  round.run_id = "job";
  round.round = 3;
  round.node_rank = 1;
  round.num_nodes = 2;
  round.local_world_size = 2;
  round.global_rank_base = 2;
  round.world_size = 4;
  round.master_addr = "10.0.0.1";
  round.master_port = 29500;
  round.restart_count = 1;
  round.max_restarts = 3;
  return round;
}

}  // namespace

TEST_CASE("a rank's environment has its place in the round and its files", "[rank_env]") {
  const mxrun::RankFiles files{"/a/1", "/a/1/error.json", "/a/1/heartbeat", ""};
  mxrun::EnvMap env = mxrun::RankEnv(Spec(), 1, files, Round(), 12.5);
  CHECK(env["RANK"] == "3");
  CHECK(env["LOCAL_RANK"] == "1");
  CHECK(env["WORLD_SIZE"] == "4");
  CHECK(env["GROUP_RANK"] == "1");
  CHECK(env["MASTER_ADDR"] == "10.0.0.1");
  CHECK(env["TORCHELASTIC_RESTART_COUNT"] == "1");
  CHECK(env["TORCHELASTIC_ERROR_FILE"] == "/a/1/error.json");
  CHECK(env["MXRUN_HEARTBEAT_FILE"] == "/a/1/heartbeat");
  CHECK(env["KEEP"] == "me");
}

TEST_CASE("a standby has no place in the job and none of the job's secrets", "[rank_env]") {
  mxrun::EnvMap env = mxrun::StandbyEnv(Spec(), 2);
  CHECK(env.count("RANK") == 0);
  CHECK(env.count("MXRUN_RDZV_TOKEN") == 0);
  CHECK(env["MXRUN_STANDBY"] == "1");
  CHECK(env["LOCAL_WORLD_SIZE"] == "2");
  CHECK(env["MXRUN_HOST"] == "node-a");
  CHECK(env["KEEP"] == "me");
}

TEST_CASE("a round notice says only what differs from the agent's environment", "[rank_env]") {
  const mxrun::RankFiles files{"/a/0", "/a/0/error.json", "", ""};
  mxrun::RoundNotice notice = mxrun::RankNotice(Spec(), 0, files, Round(), 12.5);
  CHECK(notice.round == 3);
  CHECK(notice.failure_time == 12.5);
  CHECK(notice.env.at("RANK") == "2");   // the agent's own RANK=7 differs
  CHECK(notice.env.count("KEEP") == 0);  // the same as the agent's: not sent
  CHECK(notice.env.count("PATH") == 0);
}
