#include <catch2/catch.hpp>

#include <csignal>

#include "launcher/options.h"
#include "tests/unit/parse_launch_args.h"

using mxrun::EntrypointKind;
using mxrun::LaunchOptions;
using mxrun::ParseLaunchOptions;

namespace {

absl::StatusOr<mxrun::ParseResult> Parse(std::vector<std::string> args,
                                         std::map<std::string, std::string> env = {}) {
  return mxrun::testing::ParseLaunchArgs(std::move(args), std::move(env));
}

LaunchOptions ParseOk(std::vector<std::string> args, std::map<std::string, std::string> env = {}) {
  auto result = Parse(std::move(args), std::move(env));
  INFO(result.status().ToString());
  REQUIRE(result.ok());
  REQUIRE(result->options.has_value());
  return *result->options;
}

std::string ParseError(std::vector<std::string> args, std::map<std::string, std::string> env = {}) {
  auto result = Parse(std::move(args), std::move(env));
  REQUIRE_FALSE(result.ok());
  CHECK(result.status().code() == absl::StatusCode::kInvalidArgument);
  return std::string(result.status().message());
}

}  // namespace

TEST_CASE("defaults match torchrun's", "[options]") {
  LaunchOptions o = ParseOk({"train.py"});
  CHECK(o.nnodes.min == 1);
  CHECK(o.nnodes.max == 1);
  CHECK(o.nproc_per_node == "1");
  CHECK(o.master_addr == "127.0.0.1");
  CHECK(o.master_port == 29500);
  CHECK(o.rdzv_backend == "static");
  CHECK(o.rdzv_id == "none");
  CHECK(o.max_restarts == 0);
  CHECK(o.role == "default");
  CHECK(o.agent.term_timeout == std::chrono::seconds(30));
  CHECK(o.agent.handled_signals == std::set<int>{SIGTERM, SIGINT, SIGHUP, SIGQUIT});
  CHECK(o.entrypoint_kind == EntrypointKind::kPythonScript);
  CHECK(o.entrypoint == "train.py");
}

TEST_CASE("both spellings and both value forms are accepted", "[options]") {
  CHECK(ParseOk({"--nproc_per_node=4", "x.py"}).nproc_per_node == "4");
  CHECK(ParseOk({"--nproc-per-node=4", "x.py"}).nproc_per_node == "4");
  CHECK(ParseOk({"--nproc_per_node", "4", "x.py"}).nproc_per_node == "4");
  CHECK(ParseOk({"--max-restarts", "3", "x.py"}).max_restarts == 3);
  CHECK(ParseOk({"--nnodes=2:4", "x.py"}).nnodes.max == 4);
}

TEST_CASE("arguments after the entrypoint are passed through untouched", "[options]") {
  LaunchOptions o =
      ParseOk({"--standalone", "train.py", "--nproc_per_node=9", "-m", "--lr", "0.1"});
  CHECK(o.standalone);
  CHECK(o.nproc_per_node == "1");
  CHECK(o.entrypoint == "train.py");
  CHECK(o.entrypoint_args == std::vector<std::string>{"--nproc_per_node=9", "-m", "--lr", "0.1"});
}

TEST_CASE("entrypoint kinds", "[options]") {
  CHECK(ParseOk({"-m", "pkg.mod", "a"}).entrypoint_kind == EntrypointKind::kPythonModule);
  CHECK(ParseOk({"--module", "pkg.mod"}).entrypoint_kind == EntrypointKind::kPythonModule);
  CHECK(ParseOk({"--no_python", "/bin/true"}).entrypoint_kind == EntrypointKind::kExecutable);
  CHECK(ParseOk({"--no-python", "train"}).entrypoint_kind == EntrypointKind::kExecutable);
  CHECK(ParseOk({"train", "--epochs", "1"}).entrypoint_kind == EntrypointKind::kBundledTrainer);
}

TEST_CASE("PET_* environment variables fill flags that were not given", "[options]") {
  LaunchOptions o = ParseOk(
      {"x.py"}, {{"PET_NPROC_PER_NODE", "3"}, {"PET_MAX_RESTARTS", "2"}, {"PET_STANDALONE", "1"}});
  CHECK(o.nproc_per_node == "3");
  CHECK(o.max_restarts == 2);
  CHECK(o.standalone);
  // The command line wins over the environment.
  CHECK(ParseOk({"--nproc_per_node=5", "x.py"}, {{"PET_NPROC_PER_NODE", "3"}}).nproc_per_node ==
        "5");
}

TEST_CASE("redirects, tee and the console filter", "[options]") {
  LaunchOptions o = ParseOk({"-r", "3", "--tee=0:1,1:2", "--local_ranks_filter=0,2", "x.py"});
  CHECK(o.logs.redirects.For(5) == 3);
  CHECK(o.logs.tee.For(0) == 1);
  CHECK(o.logs.tee.For(1) == 2);
  CHECK(o.logs.tee.For(2) == 0);
  CHECK(o.logs.console_ranks == std::set<int>{0, 2});
}

TEST_CASE("bad input names the flag, the value and what is accepted", "[options]") {
  CHECK_THAT(ParseError({"--nnodes=3:2", "x.py"}),
             Catch::Contains("--nnodes='3:2'") && Catch::Contains("0 < MIN <= MAX"));
  CHECK_THAT(ParseError({"--nnodes=0", "x.py"}), Catch::Contains("--nnodes"));
  CHECK_THAT(ParseError({"--nnodes=a:b:c", "x.py"}), Catch::Contains("--nnodes"));
  CHECK_THAT(ParseError({"--nproc_per_node=0", "x.py"}),
             Catch::Contains("--nproc_per_node='0'") && Catch::Contains("'gpu'"));
  CHECK_THAT(ParseError({"--nproc_per_node=abc", "x.py"}), Catch::Contains("'abc'"));
  CHECK_THAT(ParseError({"--max_restarts=-1", "x.py"}),
             Catch::Contains("--max_restarts='-1'") && Catch::Contains(">= 0"));
  CHECK_THAT(ParseError({"--max_restarts=lots", "x.py"}), Catch::Contains("not an integer"));
  CHECK_THAT(ParseError({"--master_port=70000", "x.py"}), Catch::Contains("0-65535"));
  CHECK_THAT(ParseError({"--rdzv_backend=zookeeper", "x.py"}),
             Catch::Contains("static, c10d, etcd or etcd-v2"));
  CHECK_THAT(ParseError({"--redirects=7", "x.py"}), Catch::Contains("--redirects"));
  CHECK_THAT(ParseError({"--signals_to_handle=SIGKILL", "x.py"}), Catch::Contains("SIGKILL"));
  CHECK_THAT(ParseError({"--no_python", "-m", "x"}), Catch::Contains("cannot be used together"));
  CHECK_THAT(ParseError({"--frobnicate", "x.py"}), Catch::Contains("unknown flag '--frobnicate'"));
  CHECK_THAT(ParseError({"--standalone"}), Catch::Contains("no entrypoint"));
  CHECK_THAT(ParseError({"x.py"}, {{"PET_NPROC_PER_NODE", "zero"}}),
             Catch::Contains("PET_NPROC_PER_NODE='zero'"));
}

TEST_CASE("hang detection's flags", "[options][hang]") {
  LaunchOptions defaults = ParseOk({"x.py"});
  CHECK(defaults.hang.heartbeat_timeout.count() == 0);  // off, except for the bundled trainer
  CHECK(defaults.hang.exit_barrier_timeout == std::chrono::seconds(300));
  CHECK(ParseOk({"train"}).hang.heartbeat_timeout == std::chrono::seconds(300));
  CHECK(ParseOk({"--hang_timeout=0", "train"}).hang.heartbeat_timeout.count() == 0);
  LaunchOptions o = ParseOk({"--hang_timeout=45", "--exit-barrier-timeout=0", "x.py"});
  CHECK(o.hang.heartbeat_timeout == std::chrono::seconds(45));
  CHECK(o.hang.exit_barrier_timeout.count() == 0);
  CHECK(ParseOk({"x.py"}, {{"MXRUN_HANG_TIMEOUT", "2.5"}}).hang.heartbeat_timeout ==
        std::chrono::milliseconds(2500));
  CHECK_THAT(ParseError({"--hang_timeout=soon", "x.py"}),
             Catch::Contains("--hang_timeout='soon'") && Catch::Contains("a number >= 0"));
  CHECK_THAT(ParseError({"--exit_barrier_timeout=-1", "x.py"}),
             Catch::Contains("--exit_barrier_timeout='-1'"));
}

TEST_CASE("help is not an error", "[options]") {
  auto result = Parse({"--help"});
  REQUIRE(result.ok());
  CHECK_FALSE(result->options.has_value());
  CHECK_THAT(result->help_text, Catch::Contains("--nproc_per_node"));
}

TEST_CASE("rdzv_conf parses key=value pairs", "[options]") {
  auto conf = mxrun::ParseRdzvConf("join_timeout=60, is_host=1");
  REQUIRE(conf.ok());
  CHECK(conf->at("join_timeout") == "60");
  CHECK(conf->at("is_host") == "1");
  CHECK_FALSE(mxrun::ParseRdzvConf("novalue").ok());
}

TEST_CASE("the shutdown timeout is torchrun 2.x's name for --term_timeout", "[options]") {
  CHECK(ParseOk({"--shutdown-timeout=2", "x.py"}).agent.term_timeout ==
        std::chrono::milliseconds(2000));
  CHECK(ParseOk({"--shutdown_timeout", "2.5", "x.py"}).agent.term_timeout ==
        std::chrono::milliseconds(2500));
  CHECK(ParseOk({"x.py"}, {{"PET_SHUTDOWN_TIMEOUT", "3"}}).agent.term_timeout ==
        std::chrono::milliseconds(3000));
  CHECK(ParseOk({"x.py"}, {{"TORCH_ELASTIC_SHUTDOWN_TIMEOUT", "4"}}).agent.term_timeout ==
        std::chrono::milliseconds(4000));
  // The flag above torchrun's variable, as every flag above its variables.
  CHECK(ParseOk({"--shutdown-timeout=5", "x.py"}, {{"TORCH_ELASTIC_SHUTDOWN_TIMEOUT", "4"}})
            .agent.term_timeout == std::chrono::milliseconds(5000));
  // Both names: they must agree.
  CHECK(ParseOk({"--shutdown-timeout=6", "--term_timeout=6", "x.py"}).agent.term_timeout ==
        std::chrono::milliseconds(6000));
  CHECK_THAT(ParseError({"--shutdown-timeout=2", "--term_timeout=3", "x.py"}),
             Catch::Contains("--shutdown_timeout='2' and --term_timeout='3' disagree: they are "
                             "one setting"));
  CHECK_THAT(ParseError({"x.py"}, {{"TORCH_ELASTIC_SHUTDOWN_TIMEOUT", "soon"}}),
             Catch::Contains("TORCH_ELASTIC_SHUTDOWN_TIMEOUT='soon' is not valid"));
  CHECK(ParseOk({"x.py"}).agent.term_timeout == std::chrono::milliseconds(30000));
}

TEST_CASE("torchrun 2.x's newer flags in both spellings and from PET_*", "[options][torchrun2]") {
  CHECK(ParseOk({"--virtual-local-rank", "x.py"}).virtual_local_rank);
  CHECK(ParseOk({"--virtual_local_rank", "x.py"}).virtual_local_rank);
  CHECK(ParseOk({"x.py"}, {{"PET_VIRTUAL_LOCAL_RANK", "1"}}).virtual_local_rank);
  CHECK_FALSE(ParseOk({"x.py"}).virtual_local_rank);

  CHECK(ParseOk({"--numa-binding=exclusive", "x.py"}).numa_binding == mxrun::NumaMode::kExclusive);
  CHECK(ParseOk({"--numa_binding", "core-complex", "x.py"}).numa_binding ==
        mxrun::NumaMode::kCoreComplex);
  CHECK(ParseOk({"x.py"}, {{"PET_NUMA_BINDING", "socket"}}).numa_binding ==
        mxrun::NumaMode::kSocket);
  CHECK(!ParseOk({"--numa-binding=none", "x.py"}).numa_binding);
  CHECK_THAT(ParseError({"--numa-binding=numa", "x.py"}),
             Catch::Contains("--numa_binding='numa' is not valid: unknown mode; accepted: node, "
                             "socket, exclusive or core-complex"));

  const std::string prefix = "[${role_name}${local_rank}]:";
  CHECK(ParseOk({"--log-line-prefix-template=" + prefix, "x.py"}).log_line_prefix_template ==
        prefix);
  CHECK(ParseOk({"x.py"}, {{"TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE", prefix}})
            .log_line_prefix_template == prefix);
  CHECK(ParseOk({"x.py"}, {{"PET_LOG_LINE_PREFIX_TEMPLATE", "p"}}).log_line_prefix_template == "p");
  CHECK(ParseOk({"--log_line_prefix_template=a", "x.py"},
                {{"TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE", "b"}})
            .log_line_prefix_template == "a");

  CHECK(ParseOk({"--duplicate-stdout-filters=loss,step", "x.py"}).logs.duplicate_stdout_filters ==
        std::vector<std::string>{"loss", "step"});
  CHECK(ParseOk({"--duplicate_stderr_filters", "a,,b,c", "x.py"}).logs.duplicate_stderr_filters ==
        std::vector<std::string>{"a,b", "c"});
  CHECK(ParseOk({"x.py"}, {{"PET_DUPLICATE_STDOUT_FILTERS", "x"}}).logs.duplicate_stdout_filters ==
        std::vector<std::string>{"x"});
  CHECK(ParseOk({"x.py"}).logs.duplicate_stdout_filters.empty());
  CHECK_THAT(ParseError({"--duplicate-stdout-filters=a,", "x.py"}),
             Catch::Contains("--duplicate_stdout_filters='a,' has an empty filter, which would "
                             "match every line"));

  CHECK(ParseOk({"x.py"}).event_log_handler == "null");
  CHECK(ParseOk({"--event-log-handler=console", "x.py"}).event_log_handler == "console");
  CHECK(ParseOk({"x.py"}, {{"PET_EVENT_LOG_HANDLER", "console"}}).event_log_handler == "console");
  CHECK_THAT(ParseError({"--event_log_handler=scuba", "x.py"}),
             Catch::Contains("--event_log_handler='scuba' is not valid: unknown event handler") &&
                 Catch::Contains("accepted: null, console"));

  // A standby's GPU would be fixed before it knows its rank.
  CHECK_THAT(ParseError({"--virtual-local-rank", "--standby_workers=1", "train"}),
             Catch::Contains("--standby_workers='1' is not valid: with --virtual_local_rank"));
  CHECK(ParseOk({"--virtual-local-rank", "--standby_workers=0", "train"}).virtual_local_rank);
}

TEST_CASE("torchrun's filter lists: ',,' is a comma, nothing is stripped", "[options][torchrun2]") {
  using V = std::vector<std::string>;
  CHECK(*mxrun::ParseFilterList("apple,orange") == V{"apple", "orange"});
  CHECK(*mxrun::ParseFilterList("a,,b") == V{"a,b"});
  CHECK(*mxrun::ParseFilterList("a,,,b") == V{"a,", "b"});
  CHECK(*mxrun::ParseFilterList(" x ") == V{" x "});
  CHECK(mxrun::ParseFilterList("")->empty());
  CHECK_FALSE(mxrun::ParseFilterList(",a").ok());
  CHECK(*mxrun::ParseFilterList(std::string("a\x01b,c")) == V{std::string("a\x01b"), "c"});
}

TEST_CASE("the new flags are in --help and --print-config", "[options][torchrun2]") {
  auto help = Parse({"--help"});
  REQUIRE(help.ok());
  for (const char* flag : {"--virtual-local-rank", "--numa-binding", "--log-line-prefix-template",
                           "--duplicate-stdout-filters", "--duplicate-stderr-filters",
                           "--event-log-handler", "--shutdown-timeout", "--logs-specs"}) {
    CHECK_THAT(help->help_text, Catch::Contains(flag));
  }
  auto config = Parse({"--print-config", "--numa-binding=node", "--virtual-local-rank",
                       "--event-log-handler=console", "x.py"},
                      {{"TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE", "[${rank}]"}});
  REQUIRE(config.ok());
  CHECK_THAT(config->help_text, Catch::Contains("numa_binding = \"node\"  # --numa_binding"));
  CHECK_THAT(config->help_text, Catch::Contains("virtual_local_rank = true"));
  CHECK_THAT(config->help_text, Catch::Contains("event_log_handler = \"console\""));
  CHECK_THAT(config->help_text, Catch::Contains("log_line_prefix_template = \"[${rank}]\"  # "
                                                "TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE"));
}

// torchrun 2.11's get_args_parser, its option names only (torch/distributed/run.py), each with a
// value torchrun accepts; "" for the flags that take none. A name mxrun refused as unknown would
// break a launch line written for torchrun.
TEST_CASE("every flag of torchrun 2.11 is accepted, or refused with a reason",
          "[options][torchrun2]") {
  const std::vector<std::pair<std::vector<std::string>, std::string>> torchrun_flags = {
      {{"--nnodes"}, "1:2"},
      {{"--nproc-per-node", "--nproc_per_node"}, "2"},
      {{"--rdzv-backend", "--rdzv_backend"}, "c10d"},
      {{"--rdzv-endpoint", "--rdzv_endpoint"}, "localhost:0"},
      {{"--rdzv-id", "--rdzv_id"}, "job"},
      {{"--rdzv-conf", "--rdzv_conf"}, "join_timeout=60"},
      {{"--standalone"}, ""},
      {{"--max-restarts", "--max_restarts"}, "3"},
      {{"--monitor-interval", "--monitor_interval"}, "0.1"},
      {{"--start-method", "--start_method"}, "spawn"},
      {{"--event-log-handler", "--event_log_handler"}, "console"},
      {{"--role"}, "trainer"},
      {{"-m", "--module"}, ""},
      {{"--no-python", "--no_python"}, ""},
      {{"--run-path", "--run_path"}, ""},
      {{"--log-dir", "--log_dir"}, "/tmp/logs"},
      {{"-r", "--redirects"}, "3"},
      {{"-t", "--tee"}, "0:1,1:2"},
      {{"--local-ranks-filter", "--local_ranks_filter"}, "0"},
      {{"--duplicate-stdout-filters", "--duplicate_stdout_filters"}, "loss"},
      {{"--duplicate-stderr-filters", "--duplicate_stderr_filters"}, "error"},
      {{"--node-rank", "--node_rank"}, "0"},
      {{"--master-addr", "--master_addr"}, "127.0.0.1"},
      {{"--master-port", "--master_port"}, "29501"},
      {{"--local-addr", "--local_addr"}, "127.0.0.1"},
      {{"--logs-specs", "--logs_specs"}, "my_specs"},
      {{"--numa-binding", "--numa_binding"}, "node"},
      {{"--signals-to-handle", "--signals_to_handle"}, "SIGTERM,SIGUSR1"},
      {{"--shutdown-timeout", "--shutdown_timeout"}, "10"},
      {{"--virtual-local-rank", "--virtual_local_rank"}, ""},
      {{"--log-line-prefix-template", "--log_line_prefix_template"}, "[${rank}]:"},
  };
  for (const auto& [names, value] : torchrun_flags) {
    for (const std::string& name : names) {
      std::vector<std::string> args = {name};
      if (!value.empty()) args.push_back(value);
      args.push_back("x.py");
      auto result = Parse(args);
      INFO(name << " " << value << ": " << result.status().ToString());
      if (result.ok()) continue;
      // Refused: with a reason naming the flag, never as an unknown or unexpected option.
      const std::string message(result.status().message());
      CHECK_THAT(message, !Catch::Contains("unknown flag") && !Catch::Contains("not expected") &&
                              !Catch::Contains("INI"));
      CHECK_THAT(message, Catch::Contains("--" + std::string(name == "-m" ? "module" : "")));
    }
  }
  // Only --logs-specs with a name is refused (mxrun cannot load Python entry points).
  CHECK_FALSE(Parse({"--logs-specs", "my_specs", "x.py"}).ok());
  CHECK(Parse({"--rdzv-backend", "c10d", "--rdzv-endpoint", "localhost:0", "x.py"}).ok());
}

TEST_CASE("a node rank with a dynamic backend is warned about, as torchrun 2.13 does",
          "[options]") {
  auto warned = [](std::vector<std::string> args, std::map<std::string, std::string> env = {}) {
    auto result = Parse(std::move(args), std::move(env));
    REQUIRE(result.ok());
    for (const std::string& w : result->warnings) {
      if (w.find("torchrun uses a node rank only for static rendezvous") != std::string::npos) {
        return w;
      }
    }
    return std::string();
  };
  CHECK(warned({"--nnodes=2", "--node_rank=1", "--rdzv_backend=c10d", "--rdzv_endpoint=h:29400",
                "x.py"}) ==
        "--node_rank=1 with --rdzv_backend=c10d: torchrun uses a node rank only for static "
        "rendezvous and ignores it here; mxrun takes it as a request, granted when that rank is "
        "free in the round");
  CHECK_THAT(warned({"--nnodes=2", "--rdzv_backend=etcd-v2", "--rdzv_endpoint=h:2379", "x.py"},
                    {{"PET_NODE_RANK", "1"}}),
             Catch::StartsWith("PET_NODE_RANK=1 with --rdzv_backend=etcd"));
  // Not for static rendezvous, node rank 0, or the rank Slurm gives.
  CHECK(warned({"--nnodes=2", "--node_rank=1", "--master_addr=h", "x.py"}).empty());
  CHECK(warned({"--nnodes=2", "--node_rank=0", "--rdzv_backend=c10d", "--rdzv_endpoint=h:29400",
                "x.py"})
            .empty());
  CHECK(warned({"--rdzv_backend=c10d", "--rdzv_endpoint=h:29400", "x.py"},
               {{"SLURM_JOB_ID", "7"},
                {"SLURM_NNODES", "2"},
                {"SLURM_NODEID", "1"},
                {"SLURM_JOB_NODELIST", "n[0-1]"},
                {"SLURM_NTASKS_PER_NODE", "1"}})
            .empty());
}
