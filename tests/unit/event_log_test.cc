// --event-log-handler's records: torchelastic's JSON shape, byte for byte as Python's json.dumps
// writes the Event that SimpleElasticAgent._construct_event builds (expected lines made with
// Python's json module from the same values).

#include <catch2/catch.hpp>

#include <unistd.h>

#include "agent/event_log.h"
#include "nlohmann/json.hpp"

using mxrun::ElasticEvent;

TEST_CASE("a worker's failure is serialized as torchelastic's Event", "[events]") {
  ElasticEvent event;
  event.state = "FAILED";
  event.from_worker = true;
  event.run_id = "job";
  event.global_rank = 3;
  event.group_rank = 1;
  event.worker_pid = 4242;
  event.role = "trainer";
  event.hostname = "node1.example";
  event.total_run_time = 12;
  event.rdzv_backend = "c10d";
  event.raw_error = "{\"message\": \"x\"}";
  event.agent_restarts = 1;
  event.group_world_size = 2;
  event.entry_point = "/usr/bin/python3";
  event.local_rank = 1;
  event.role_rank = 3;
  event.role_world_size = 4;
  event.exit_code = -9;
  CHECK(mxrun::SerializeEvent(event) ==
        R"({"name": "torchelastic.worker.status.FAILED", "source": "WORKER", "timestamp": 0, )"
        R"("metadata": {"run_id": "job", "global_rank": 3, "group_rank": 1, "worker_id": "4242", )"
        R"("role": "trainer", "hostname": "node1.example", "state": "FAILED", )"
        R"("total_run_time": 12, "rdzv_backend": "c10d", "raw_error": "{\"message\": \"x\"}", )"
        R"("metadata": "{\"group_world_size\": 2, \"entry_point\": \"/usr/bin/python3\", )"
        R"(\"local_rank\": [1], \"role_rank\": [3], \"role_world_size\": [4], \"exit_code\": )"
        R"([-9], \"worker_pid\": [4242]}", "agent_restarts": 1, "duration_ms": null}})");
}

TEST_CASE("an agent event has no worker fields and a duration", "[events]") {
  ElasticEvent event;
  event.state = "RENDEZVOUS";
  event.run_id = "job";
  event.role = "default";
  event.hostname = "h";
  event.rdzv_backend = "static";
  event.entry_point = "train";
  event.duration_ms = 12.5;
  CHECK(mxrun::SerializeEvent(event) ==
        R"({"name": "torchelastic.worker.status.RENDEZVOUS", "source": "AGENT", "timestamp": 0, )"
        R"("metadata": {"run_id": "job", "global_rank": null, "group_rank": null, )"
        R"("worker_id": null, "role": "default", "hostname": "h", "state": "RENDEZVOUS", )"
        R"("total_run_time": 0, "rdzv_backend": "static", "raw_error": null, "metadata": )"
        R"("{\"group_world_size\": null, \"entry_point\": \"train\"}", "agent_restarts": 0, )"
        R"("duration_ms": 12.5}})");
  event.duration_ms = 0;
  CHECK_THAT(mxrun::SerializeEvent(event), Catch::EndsWith(R"("duration_ms": 0.0}})"));
}

TEST_CASE("the console handler writes one line per event and null writes none", "[events]") {
  for (const std::string handler : {"console", "null"}) {
    int fds[2];
    REQUIRE(pipe(fds) == 0);
    mxrun::EventLogConfig config;
    config.handler = handler;
    config.run_id = "job";
    config.console_fd = fds[1];
    mxrun::ElasticEventLog log(config);
    mxrun::RoundAssignment round;
    round.node_rank = 1;
    round.num_nodes = 2;
    round.global_rank_base = 4;
    round.world_size = 8;
    round.restart_count = 2;
    log.SetRound(round);
    log.Worker("START", 3, 99);
    log.Agent("SUCCEEDED");
    close(fds[1]);
    char buffer[8192];
    const ssize_t n = read(fds[0], buffer, sizeof buffer);
    close(fds[0]);
    if (handler == "null") {
      CHECK(n == 0);
      continue;
    }
    REQUIRE(n > 0);
    std::string text(buffer, static_cast<size_t>(n));
    const size_t newline = text.find('\n');
    REQUIRE(newline != std::string::npos);
    auto start = nlohmann::json::parse(text.substr(0, newline));
    CHECK(start["name"] == "torchelastic.worker.status.START");
    CHECK(start["metadata"]["global_rank"] == 7);
    CHECK(start["metadata"]["group_rank"] == 1);
    CHECK(start["metadata"]["agent_restarts"] == 2);
    auto inner = nlohmann::json::parse(start["metadata"]["metadata"].get<std::string>());
    CHECK(inner["local_rank"] == nlohmann::json::array({3}));
    CHECK(inner["role_world_size"] == nlohmann::json::array({8}));
    CHECK(inner["worker_pid"] == nlohmann::json::array({99}));
    auto end = nlohmann::json::parse(text.substr(newline + 1));
    CHECK(end["source"] == "AGENT");
    CHECK(end["metadata"]["state"] == "SUCCEEDED");
  }
  CHECK(mxrun::IsEventLogHandler("console"));
  CHECK_FALSE(mxrun::IsEventLogHandler("dynamic_rendezvous"));
}
