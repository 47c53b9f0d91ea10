// The agent's configuration composed from the flags in one place (launcher/agent_setup.h): the
// agent's settings whole, the event records' labels, the workers' spec, the GPUs they drive, and
// the usage error of a --virtual_local_rank that lacks devices. No processes, no network.

#include <catch2/catch.hpp>

#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "launcher/agent_setup.h"
#include "tests/unit/parse_launch_args.h"

namespace {

mxrun::LaunchOptions ParseOk(std::vector<std::string> args) {
  auto result = mxrun::testing::ParseLaunchArgs(std::move(args), {});
  INFO(result.status().ToString());
  REQUIRE(result.ok());
  REQUIRE(result->options.has_value());
  return *result->options;
}

const mxrun::WorkerCommand kCommand{
    "/usr/bin/python3", {"/usr/bin/python3", "train.py"}, "train.py"};

}  // namespace

TEST_CASE(
    "the agent's configuration takes the flags' settings whole and the workers' spec from "
    "the command and the environment",
    "[agent_setup]") {
  const mxrun::LaunchOptions options =
      ParseOk({"--nproc_per_node=2", "--role=trainer", "--term_timeout=7", "--standby_workers=1",
               "train.py"});
  const mxrun::EnvMap env{{"PATH", "/usr/bin"}, {"CUDA_VISIBLE_DEVICES", "3,5"}};
  absl::StatusOr<mxrun::AgentConfig> config =
      mxrun::ComposeAgentConfig(options, env, kCommand, 2, "run-1");
  REQUIRE(config.ok());
  CHECK(config->settings.term_timeout == std::chrono::seconds(7));
  CHECK(config->settings.handled_signals == options.agent.handled_signals);
  CHECK(config->entrypoint_name == "train.py");
  CHECK(config->events.run_id == "run-1");
  CHECK(config->events.role == "trainer");
  CHECK(config->events.rdzv_backend == "c10d");  // a standalone job's, as torchrun names it
  CHECK(config->events.entry_point == "/usr/bin/python3");
  const mxrun::WorkerSpec& worker = config->worker;
  CHECK(worker.executable == "/usr/bin/python3");
  CHECK(worker.argv == kCommand.argv);
  CHECK(worker.role == "trainer");
  CHECK(worker.standby_workers == 1);
  CHECK_FALSE(worker.host_name.empty());
  CHECK(worker.base_env.at("PATH") == "/usr/bin");
  CHECK(worker.base_env.at("TORCHELASTIC_SIGNALS_TO_HANDLE") == options.signals_to_handle_text);
  CHECK(config->gpu_entries == std::vector<std::string>{"3", "5"});
  CHECK(config->settings.health.gpu_entries == config->gpu_entries);
  CHECK_FALSE(config->settings.health.gpu_entries_are_local_ranks);
}

TEST_CASE("without CUDA_VISIBLE_DEVICES the workers' GPUs are their local ranks", "[agent_setup]") {
  absl::StatusOr<mxrun::AgentConfig> config = mxrun::ComposeAgentConfig(
      ParseOk({"--nproc_per_node=2", "train.py"}), {}, kCommand, 2, "run-1");
  REQUIRE(config.ok());
  CHECK(config->gpu_entries == std::vector<std::string>{"0", "1"});
  CHECK(config->settings.health.gpu_entries_are_local_ranks);
}

TEST_CASE("a --virtual_local_rank with fewer visible devices than workers is a usage error",
          "[agent_setup]") {
  const mxrun::LaunchOptions options =
      ParseOk({"--nproc_per_node=2", "--virtual_local_rank", "train.py"});
  absl::StatusOr<mxrun::AgentConfig> config =
      mxrun::ComposeAgentConfig(options, {{"CUDA_VISIBLE_DEVICES", "0"}}, kCommand, 2, "run-1");
  REQUIRE_FALSE(config.ok());
  CHECK(config.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(config.status().message()),
             Catch::Contains("--virtual_local_rank: CUDA_VISIBLE_DEVICES='0' lists 1 device(s) "
                             "for 2 workers"));
  CHECK(
      mxrun::ComposeAgentConfig(options, {{"CUDA_VISIBLE_DEVICES", "0,1"}}, kCommand, 2, "r").ok());
}
