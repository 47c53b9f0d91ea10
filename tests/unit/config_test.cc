#include <catch2/catch.hpp>

#include <fstream>

#include "launcher/flags/config_file.h"
#include "launcher/options.h"
#include "tests/temp_dir.h"
#include "tests/unit/parse_launch_args.h"

using mxrun::ParseConfigText;
using mxrun::ParseLaunchOptions;

namespace {

// A configuration file that exists for the test's duration.
class ConfigOnDisk {
 public:
  explicit ConfigOnDisk(const std::string& text) : path_(dir_.path() + "/job.toml") {
    std::ofstream(path_) << text;
  }
  const std::string& path() const { return path_; }

 private:
  mxrun::testing::TempDir dir_;
  std::string path_;
};

absl::StatusOr<mxrun::ParseResult> Parse(std::vector<std::string> args,
                                         std::map<std::string, std::string> env = {}) {
  return mxrun::testing::ParseLaunchArgs(std::move(args), std::move(env));
}

std::string ErrorOf(const std::string& text) {
  auto parsed = ParseConfigText("job.toml", text);
  return parsed.ok() ? "no error" : std::string(parsed.status().message());
}

}  // namespace

TEST_CASE("TOML: strings, numbers, booleans, arrays and comments", "[config]") {
  auto file = ParseConfigText("job.toml",
                              "# comment\n"
                              "\n"
                              "nnodes = \"2:4\"  # trailing comment\n"
                              "nproc_per_node = 8\n"
                              "term_timeout = 2.5\n"
                              "standalone = false\n"
                              "rdzv_id = 'literal \\\\ kept'\n"
                              "args = [\"--lr\", \"0.1\", 'a b']\n");
  REQUIRE(file.ok());
  REQUIRE(file->entries.size() == 6);
  CHECK(file->entries[0].key == "nnodes");
  CHECK(file->entries[0].values[0] == "2:4");
  CHECK(file->entries[0].line == 3);
  CHECK(file->entries[1].values[0] == "8");
  CHECK(file->entries[2].values[0] == "2.5");
  CHECK(file->entries[3].values[0] == "false");
  CHECK(file->entries[4].values[0] == "literal \\\\ kept");
  CHECK(file->entries[5].is_array);
  CHECK(file->entries[5].values == std::vector<std::string>{"--lr", "0.1", "a b"});
}

// What the hand-written subset before toml++ refused: arrays over several lines, tables.
TEST_CASE("TOML: multi-line arrays, inline tables and sections", "[config]") {
  auto file = ParseConfigText("job.toml",
                              "args = [\n"
                              "  \"--lr\",  # the learning rate\n"
                              "  \"0.1\",\n"
                              "]\n"
                              "rdzv_conf = { join_timeout = 30, last_call_timeout = 2.5 }\n"
                              "[health]\n"
                              "on = true\n");
  REQUIRE(file.ok());
  REQUIRE(file->entries.size() == 3);
  CHECK(file->entries[0].values == std::vector<std::string>{"--lr", "0.1"});
  CHECK(file->entries[1].is_table);
  CHECK(file->entries[1].values[0] == "join_timeout=30,last_call_timeout=2.5");
  CHECK(file->entries[1].line == 5);
  CHECK(file->entries[2].key == "health");
  CHECK(file->entries[2].line == 6);

  ConfigOnDisk config(
      "rdzv_conf = { join_timeout = 30 }\nargs = [\n  \"--epochs\",\n  \"2\"\n]\n"
      "entrypoint = \"train\"\nstandalone = true\n");
  auto parsed = Parse({"--config", config.path()});
  REQUIRE(parsed.ok());
  CHECK(parsed->options->rdzv_conf == std::map<std::string, std::string>{{"join_timeout", "30"}});
  CHECK(parsed->options->entrypoint_args == std::vector<std::string>{"--epochs", "2"});
  // Only a flag that takes k=v,k=v may be a table.
  ConfigOnDisk table("[nnodes]\nmin = 1\n");
  auto refused = Parse({"--config", table.path(), "x.py"});
  REQUIRE_FALSE(refused.ok());
  CHECK_THAT(std::string(refused.status().message()),
             Catch::StartsWith(table.path() + ":1: 'nnodes' takes a single value, not a table"));
}

TEST_CASE("malformed configuration files name the file and line", "[config]") {
  CHECK_THAT(ErrorOf("x = \"open\n"), Catch::StartsWith("job.toml:1: "));
  CHECK_THAT(ErrorOf("x = 1\nx = 2\n"),
             Catch::StartsWith("job.toml:2: ") && Catch::Contains("redefine"));
  CHECK_THAT(ErrorOf("x = gpu\n"), Catch::StartsWith("job.toml:1: ") &&
                                       Catch::Contains("text needs quotes: x = \"gpu\""));
  CHECK_THAT(ErrorOf("x = 1 2\n"), Catch::StartsWith("job.toml:1: "));
  CHECK_THAT(ErrorOf("\n\nx = [1, 2\n"), Catch::StartsWith("job.toml:"));
  CHECK_THAT(ErrorOf("= 3\n"), Catch::StartsWith("job.toml:1: ") && Catch::Contains("keys"));
  CHECK_THAT(ErrorOf("x = 1979-05-27\n"), Catch::Contains("'x' is a date or time"));
  CHECK_THAT(ErrorOf("x = [[1]]\n"), Catch::Contains("not a string, number or boolean"));
  // Beyond ASCII outside strings and comments: a clear error before toml++ 3.3, which reaches
  // undefined behaviour on some of them (scripts/fuzz.sh found U+02CF).
  CHECK_THAT(ErrorOf("a = 1\nnnodes = 2 \xcb\x8f\n"),
             Catch::StartsWith("job.toml:2: a character beyond ASCII outside a string"));
  CHECK_THAT(ErrorOf("x = \xc3\xa9\n"), Catch::Contains("beyond ASCII"));
  CHECK_THAT(ErrorOf("x = \"a\\\"\" \xc3\xa9\n"), Catch::Contains("beyond ASCII"));
  CHECK_THAT(ErrorOf("x = '''\n\xc3\xa9'''\ny = \xc3\xa9\n"),
             Catch::StartsWith("job.toml:3: a character beyond ASCII"));
  // ... and fine inside them.
  CHECK(ErrorOf("# caf\xc3\xa9\nlog_dir = \"/data/caf\xc3\xa9\"  # \xcb\x8f\n"
                "role = 'r\xc3\xb4le'\nargs = [\"\"\"x\n\xc3\xa9\"\"\"]\n") == "no error");
}

TEST_CASE("precedence: flag over MXRUN_* over PET_* over file over default", "[config]") {
  ConfigOnDisk config(
      "nproc_per_node = 3\nmax_restarts = 4\nterm_timeout = 7\nrole = \"file\"\n"
      "log_dir = \"/file/logs\"\n");
  auto parsed =
      Parse({"--config", config.path(), "--nproc_per_node=1", "x.py"},
            {{"MXRUN_MAX_RESTARTS", "5"}, {"PET_MAX_RESTARTS", "6"}, {"PET_TERM_TIMEOUT", "8"}});
  REQUIRE(parsed.ok());
  const auto& o = *parsed->options;
  CHECK(o.nproc_per_node == "1");                          // flag
  CHECK(o.max_restarts == 5);                              // MXRUN_* over PET_* and the file
  CHECK(o.agent.term_timeout == std::chrono::seconds(8));  // PET_* over the file
  CHECK(o.role == "file");                                 // file over the default
  CHECK(o.logs.log_dir == "/file/logs");
  CHECK(o.master_port == 29500);  // default
}

TEST_CASE("a configuration file can name what to run", "[config]") {
  ConfigOnDisk config("entrypoint = \"train\"\nargs = [\"--epochs\", \"2\"]\nstandalone = true\n");
  auto parsed = Parse({"--config", config.path()});
  REQUIRE(parsed.ok());
  CHECK(parsed->options->entrypoint == "train");
  CHECK(parsed->options->entrypoint_args == std::vector<std::string>{"--epochs", "2"});
  CHECK(parsed->options->standalone);
  // A command line entrypoint wins, with its own arguments.
  auto cli = Parse({"--config", config.path(), "x.py", "--a"});
  CHECK(cli->options->entrypoint == "x.py");
  CHECK(cli->options->entrypoint_args == std::vector<std::string>{"--a"});
}

TEST_CASE("unknown keys and bad values in the file are errors with file and line", "[config]") {
  ConfigOnDisk unknown("nproc_per_node = 2\nnprocs = 2\n");
  auto a = Parse({"--config", unknown.path(), "x.py"});
  REQUIRE_FALSE(a.ok());
  CHECK_THAT(std::string(a.status().message()),
             Catch::StartsWith(unknown.path() + ":2: unknown key 'nprocs'"));
  ConfigOnDisk bad("\nnproc_per_node = \"lots\"\n");
  auto b = Parse({"--config", bad.path(), "x.py"});
  REQUIRE_FALSE(b.ok());
  CHECK_THAT(std::string(b.status().message()),
             Catch::StartsWith(bad.path() + ":2: nproc_per_node='lots' is not valid"));
  ConfigOnDisk not_bool("standalone = \"yes\"\n");
  auto c = Parse({"--config", not_bool.path(), "x.py"});
  CHECK_THAT(std::string(c.status().message()), Catch::Contains("true or false"));
  ConfigOnDisk array("nnodes = [1, 2]\n");
  auto d = Parse({"--config", array.path(), "x.py"});
  CHECK_THAT(std::string(d.status().message()), Catch::Contains("not an array"));
  auto missing = Parse({"--config", "/nonexistent/job.toml", "x.py"});
  CHECK_THAT(std::string(missing.status().message()), Catch::Contains("cannot open"));
}

TEST_CASE("print-config shows every value with its source", "[config]") {
  ConfigOnDisk config("max_restarts = 4\nentrypoint = \"train\"\n");
  auto parsed = Parse({"--config", config.path(), "--print-config", "--nproc_per_node=2"},
                      {{"PET_TERM_TIMEOUT", "9"}});
  REQUIRE(parsed.ok());
  CHECK_FALSE(parsed->options);
  const std::string& text = parsed->help_text;
  CHECK_THAT(text, Catch::Contains("nproc_per_node = \"2\"  # --nproc_per_node"));
  CHECK_THAT(text, Catch::Contains("term_timeout = \"9\"  # PET_TERM_TIMEOUT"));
  CHECK_THAT(text,
             Catch::Contains("max_restarts = \"4\"  # " + config.path() + ":1: max_restarts"));
  CHECK_THAT(text, Catch::Contains("master_port = \"29500\"  # default"));
  CHECK_THAT(text, Catch::Contains("entrypoint = \"train\"  # " + config.path() + ":2"));
  // What it prints is itself a valid configuration file.
  CHECK(ParseConfigText("printed", text).ok());
}

TEST_CASE("Kubeflow's MASTER_ADDR and MASTER_PORT stand in for the flags", "[config]") {
  auto parsed = Parse(
      {"--nnodes=2", "--node_rank=1", "x.py"},
      {{"MASTER_ADDR", "job-master-0"}, {"MASTER_PORT", "23456"}, {"PET_NPROC_PER_NODE", "4"}});
  REQUIRE(parsed.ok());
  CHECK(parsed->options->master_addr == "job-master-0");
  CHECK(parsed->options->master_port == 23456);
  CHECK(parsed->options->nproc_per_node == "4");
  // PET_* and the flags still win.
  auto pet = Parse({"--master_port=1234", "x.py"},
                   {{"MASTER_ADDR", "a"}, {"PET_MASTER_ADDR", "b"}, {"MASTER_PORT", "23456"}});
  CHECK(pet->options->master_addr == "b");
  CHECK(pet->options->master_port == 1234);
}

TEST_CASE("print-config refuses what a launch refuses before printing", "[config]") {
  struct Case {
    std::vector<std::string> args;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {{"--nnodes=1", "--node_rank=1"}, "is not valid with one node"},
      {{"--nnodes=1:2"}, "needs a dynamic rendezvous"},
      {{"--nnodes=2", "--node_rank=2"}, "--node_rank=2 is not valid with --nnodes=2"},
      {{"--nnodes=2", "--rdzv_backend=c10d"}, "needs --rdzv_endpoint"},
      {{"--nnodes=2", "--rdzv_backend=c10d", "--rdzv_endpoint=h:x"}, "--rdzv_endpoint:"},
      {{"--rdzv_conf=speed=3"}, "--rdzv_conf key 'speed' is not known"},
      {{"--rdzv_conf=token_file=/nonexistent/token"},
       "token_file=/nonexistent/token: cannot be read"},
      {{"-x.py"}, "unknown flag '-x.py'"},
      {{"--logs-specs=my_specs"},
       "--logs_specs='my_specs' is not valid: mxrun cannot load "
       "torchrun.logs_specs entry points"},
      {{"--logs_specs", "x"},
       "accepted: nothing (the default); for log files and streams use "
       "--log_dir"},
      {{"--nnodes=2", "--rdzv_backend=etcd", "--rdzv_id=j"},
       "needs --rdzv_endpoint=HOST:PORT[,HOST:PORT...]"},
      {{"--nnodes=2", "--rdzv_backend=etcd", "--rdzv_endpoint=e1:2379,e2:x", "--rdzv_id=j"},
       "e2:x"},
      {{"--nnodes=2", "--rdzv_backend=etcd-v2", "--rdzv_endpoint=e1", "--rdzv_id=j",
        "--rdzv_conf=protocol=udp"},
       "protocol='udp' is not valid; accepted: http or https"},
      {{"--nnodes=2", "--rdzv_backend=etcd", "--rdzv_endpoint=e1", "--rdzv_id=j",
        "--rdzv_conf=lease_ttl=0.5"},
       "lease_ttl=0.5 is not valid; accepted: whole seconds"},
      {{"--nnodes=2", "--rdzv_backend=etcd", "--rdzv_endpoint=e1", "--rdzv_id=j",
        "--rdzv_conf=etcd_prefix=noslash"},
       "etcd_prefix='noslash' is not valid"},
      {{"--nnodes=2", "--rdzv_backend=etcd", "--rdzv_endpoint=e1", "--rdzv_id=j",
        "--rdzv_conf=master_service=a/b"},
       "master_service='a/b' is not valid"},
      {{"--nnodes=2", "--rdzv_backend=etcd", "--rdzv_endpoint=e1", "--rdzv_id=j",
        "--rdzv_conf=master_service=s,is_host=1"},
       "is_host=1 and master_service"},
      {{"--nnodes=2", "--rdzv_backend=c10d", "--rdzv_endpoint=h:1", "--rdzv_id=j",
        "--rdzv_conf=lease_ttl=3"},
       "--rdzv_conf key 'lease_ttl' is not known"},
  };
  for (const Case& c : cases) {
    std::vector<std::string> args = c.args;
    args.insert(args.begin(), "--print-config");
    auto parsed = Parse(args);
    INFO(c.expected);
    REQUIRE_FALSE(parsed.ok());
    CHECK_THAT(std::string(parsed.status().message()), Catch::Contains(c.expected));
  }
  // Without an entrypoint it still prints (a configuration may name it later).
  auto bare = Parse({"--print-config", "--nnodes=2", "--rdzv_backend=c10d",
                     "--rdzv_endpoint=head:29400", "--rdzv_id=job"});
  REQUIRE(bare.ok());
  CHECK_THAT(bare->help_text, Catch::Contains("rdzv_id = \"job\"  # --rdzv_id"));
  CHECK(bare->warnings.empty());
  // torchrun's etcd-v2 spelling is accepted.
  auto etcd = Parse({"--print-config", "--nnodes=2:3", "--rdzv_backend=etcd-v2",
                     "--rdzv_endpoint=e1:2379,e2:2379", "--rdzv_id=job",
                     "--rdzv_conf=protocol=http,lease_ttl=3,master_service=svc"});
  INFO(etcd.status().ToString());
  REQUIRE(etcd.ok());
  CHECK_THAT(etcd->help_text, Catch::Contains("rdzv_backend = \"etcd-v2\""));
}

TEST_CASE("print-config warns about what only this machine lacks and keeps the notices",
          "[config]") {
  auto parsed =
      Parse({"--print-config", "--nproc_per_node=gpu", "--no_python", "/nonexistent/program"},
            {{"CUDA_VISIBLE_DEVICES", ""}, {"SLURM_JOB_ID", "77"}, {"SLURM_NNODES", "1"}});
  REQUIRE(parsed.ok());
  CHECK_FALSE(parsed->options);
  CHECK_THAT(parsed->help_text, Catch::Contains("nproc_per_node = \"gpu\""));
  REQUIRE(parsed->warnings.size() == 2);
  CHECK_THAT(parsed->warnings[0], Catch::Contains("no NVIDIA GPU is visible"));
  CHECK_THAT(parsed->warnings[1], Catch::Contains("/nonexistent/program"));
  REQUIRE(parsed->notices.size() == 1);
  CHECK_THAT(parsed->notices[0], Catch::Contains("Slurm job 77: using --nnodes=1"));
}

TEST_CASE("print-config escapes newlines and tabs so its output reads back", "[config]") {
  const std::string role = "a\tb \"c\"\nd\\e";
  auto parsed = Parse({"--print-config", "--role=" + role, "--no_python", "true", "x\ny"});
  REQUIRE(parsed.ok());
  auto file = ParseConfigText("printed", parsed->help_text);
  INFO(parsed->help_text);
  REQUIRE(file.ok());
  std::map<std::string, std::vector<std::string>> read;
  for (const auto& entry : file->entries) read[entry.key] = entry.values;
  CHECK(read["role"] == std::vector<std::string>{role});
  CHECK(read["args"] == std::vector<std::string>{"x\ny"});
}
