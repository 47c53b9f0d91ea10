// torchrun 2.x's newer flags on real mxrun processes with small shell, test_child and Python
// workers: --virtual-local-rank, --log-line-prefix-template, --duplicate-std*-filters,
// --event-log-handler, --numa-binding, and a launch line from a public training repository.
// Every wait is bounded.

#include <catch2/catch.hpp>

#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <unistd.h>

#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "nlohmann/json.hpp"
#include "tests/fake_nvml.h"
#include "tests/subprocess.h"
#include "tests/temp_dir.h"

using mxrun::testing::CountOccurrences;
using mxrun::testing::Describe;
using mxrun::testing::IntsAfter;
using mxrun::testing::ProcessResult;
using mxrun::testing::ReadEnvFile;
using mxrun::testing::ReadFile;
using mxrun::testing::Run;
using mxrun::testing::Subprocess;
using mxrun::testing::TempDir;

namespace {

const std::string kMxrun = MXRUN_BIN;

std::vector<std::string> Mxrun(std::vector<std::string> flags,
                               std::vector<std::string> child_args) {
  return mxrun::testing::MxrunWithChild(flags, child_args);
}

// `mxrun FLAGS --no_python /bin/sh -c SCRIPT`.
std::vector<std::string> MxrunShell(std::vector<std::string> flags, const std::string& script) {
  std::vector<std::string> argv = {kMxrun};
  argv.insert(argv.end(), flags.begin(), flags.end());
  argv.insert(argv.end(), {"--no_python", "/bin/sh", "-c", script});
  return argv;
}

std::string HostName() {
  char name[HOST_NAME_MAX + 1] = {};
  gethostname(name, sizeof name - 1);
  return name;
}

// The one run folder under `log_dir` that mxrun names in its "worker logs:" line.
std::string RunDir(const std::string& err) {
  std::smatch m;
  REQUIRE(std::regex_search(err, m, std::regex("worker logs: (\\S+)/attempt_")));
  return m[1];
}

// Lines of `text` that are torchelastic event records, parsed.
std::vector<nlohmann::json> Events(const std::string& text) {
  std::vector<nlohmann::json> events;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("{\"name\": \"torchelastic.", 0) == 0)
      events.push_back(nlohmann::json::parse(line));
  }
  return events;
}

}  // namespace

TEST_CASE("virtual local rank: LOCAL_RANK=0 and one device per worker",
          "[integration][torchrun2]") {
  // (CUDA_VISIBLE_DEVICES of the agent, the device each of the two workers must see)
  auto [visible, expected] = GENERATE(table<std::string, std::vector<std::string>>({
      {"", {"0", "1"}},
      {"4,5", {"4", "5"}},
      {"GPU-8a1b2c3d-0000-1111-2222-333344445555,GPU-9f8e7d6c-0000-1111-2222-333344445555",
       {"GPU-8a1b2c3d-0000-1111-2222-333344445555", "GPU-9f8e7d6c-0000-1111-2222-333344445555"}},
  }));
  const std::string spelling = GENERATE(as<std::string>{}, "--virtual-local-rank",
                                        "--virtual_local_rank", "PET_VIRTUAL_LOCAL_RANK");
  TempDir dir;
  std::map<std::string, std::string> env = {{"CUDA_VISIBLE_DEVICES", visible}};
  std::vector<std::string> flags = {"--standalone", "--nproc_per_node=2"};
  if (spelling.rfind("--", 0) == 0) {
    flags.push_back(spelling);
  } else {
    env[spelling] = "1";
  }
  ProcessResult r = Run(Mxrun(flags, {"--env-out=" + dir.path()}), env);
  INFO(spelling << " CUDA_VISIBLE_DEVICES=" << visible << "\n" << Describe(r));
  REQUIRE(r.exit_code == 0);
  for (int rank = 0; rank < 2; ++rank) {
    auto worker = ReadEnvFile(dir.path() + "/env." + std::to_string(rank));
    CHECK(worker["LOCAL_RANK"] == "0");
    CHECK(worker["RANK"] == std::to_string(rank));
    CHECK(worker["CUDA_VISIBLE_DEVICES"] == expected[rank]);
  }
}

TEST_CASE("virtual local rank with nproc_per_node=gpu, and a list too short for the workers",
          "[integration][torchrun2]") {
  TempDir dir;
  ProcessResult r = Run(Mxrun({"--standalone", "--nproc_per_node=gpu", "--virtual-local-rank"},
                              {"--env-out=" + dir.path()}),
                        {{"CUDA_VISIBLE_DEVICES", "GPU-a1,GPU-b2,GPU-c3"}});
  INFO(Describe(r));
  REQUIRE(r.exit_code == 0);
  CHECK(ReadEnvFile(dir.path() + "/env.2")["CUDA_VISIBLE_DEVICES"] == "GPU-c3");
  CHECK(ReadEnvFile(dir.path() + "/env.2")["LOCAL_RANK"] == "0");
  r = Run(Mxrun({"--nproc_per_node=3", "--virtual-local-rank"}, {}),
          {{"CUDA_VISIBLE_DEVICES", "0,1"}});
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Catch::Contains("--virtual_local_rank: CUDA_VISIBLE_DEVICES='0,1' lists 2 "
                                    "device(s) for 3 workers"));
}

TEST_CASE("a line prefix template on the console and in the filtered files, not in rank logs",
          "[integration][torchrun2]") {
  const std::string templ = "[${role_name}${local_rank}@${hostname} r${rank}]:";
  const bool from_env = GENERATE(false, true);
  TempDir dir;
  std::vector<std::string> flags = {"--nproc_per_node=2",
                                    "--role=trainer",
                                    "--tee=3",
                                    "--log_dir=" + dir.path(),
                                    "--duplicate-stdout-filters=line=1 ",
                                    "--duplicate_stderr_filters=exiting with"};
  std::map<std::string, std::string> env;
  if (from_env) {
    env["TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE"] = templ;
  } else {
    flags.push_back("--log-line-prefix-template=" + templ);
  }
  // Rank 1 fails only once both ranks have printed their lines: a failure stops rank 0, which on a
  // loaded machine (or under a sanitizer) may not have printed yet.
  Subprocess job(
      Mxrun(flags, {"--lines=3", "--exit=4", "--only-rank=1", "--ready", "--fail-on-signal"}), env);
  REQUIRE(job.WaitForStdout("ready rank=", 2, std::chrono::seconds(30)));
  const std::vector<int> rank1 = IntsAfter(job.out(), "ready rank=1 pid");
  REQUIRE(rank1.size() == 1);
  REQUIRE(kill(rank1[0], SIGUSR1) == 0);
  ProcessResult r = job.Wait(std::chrono::seconds(60));
  INFO(Describe(r));
  CHECK(r.exit_code == 1);
  const std::string host = HostName();
  CHECK(CountOccurrences(r.out, "[trainer0@" + host + " r0]:rank=0 line=") == 3);
  CHECK(CountOccurrences(r.out, "[trainer1@" + host + " r1]:rank=1 line=") == 3);
  CHECK_THAT(r.err, Catch::Contains("[trainer1@" + host + " r1]:test_child rank=1 exiting with 4"));
  CHECK(CountOccurrences(r.out, "[n0 r") == 0);  // mxrun's own prefix is replaced

  const std::string attempt = RunDir(r.err) + "/attempt_0";
  const std::string filtered_out = ReadFile(attempt + "/filtered_stdout.log");
  CHECK(CountOccurrences(filtered_out, "\n") == 2);  // "line=1 " from each rank, nothing else
  CHECK_THAT(filtered_out, Catch::Contains("[trainer0@" + host + " r0]:rank=0 line=1 "));
  CHECK_THAT(filtered_out, Catch::Contains("[trainer1@" + host + " r1]:rank=1 line=1 "));
  const std::string filtered_err = ReadFile(attempt + "/filtered_stderr.log");
  CHECK(filtered_err == "[trainer1@" + host + " r1]:test_child rank=1 exiting with 4\n");
  // The per-rank logs stay raw, as torchrun's.
  const std::string rank_log = ReadFile(attempt + "/0/stdout.log");
  CHECK(CountOccurrences(rank_log, "rank=0 line=") == 3);
  CHECK(CountOccurrences(rank_log, "trainer0") == 0);
}

TEST_CASE("duplicate filters without --log_dir keep their file in a kept temporary folder",
          "[integration][torchrun2]") {
  TempDir tmp;
  // A port keeps the static rendezvous and its run id (without one: --standalone, a random id).
  ProcessResult r =
      Run(Mxrun({"--nproc_per_node=1", "--rdzv_id=filtered", "--master_port=0"}, {"--lines=2"}),
          {{"PET_DUPLICATE_STDOUT_FILTERS", "line=0"}, {"TMPDIR", tmp.path()}});
  INFO(Describe(r));
  REQUIRE(r.exit_code == 0);
  const std::string run_dir = RunDir(r.err);
  CHECK_THAT(run_dir, Catch::StartsWith(tmp.path() + "/mxrun-logs/filtered_"));
  CHECK(ReadFile(run_dir + "/attempt_0/filtered_stdout.log") == "[n0 r0] rank=0 line=0 xxxxxx\n");
}

TEST_CASE("event-log-handler=console prints torchelastic's event records",
          "[integration][torchrun2]") {
  const bool from_env = GENERATE(false, true);
  std::vector<std::string> flags = {"--nproc_per_node=2", "--max_restarts=1", "--rdzv_id=events",
                                    "--master_port=0"};  // static: as given
  std::map<std::string, std::string> env;
  if (from_env) {
    env["PET_EVENT_LOG_HANDLER"] = "console";
  } else {
    flags.push_back("--event-log-handler=console");
  }
  ProcessResult r = Run(Mxrun(flags, {"--exit=4", "--only-rank=1", "--fail-below-attempt=1"}), env);
  INFO(Describe(r));
  REQUIRE(r.exit_code == 0);
  std::vector<nlohmann::json> events = Events(r.err);
  std::vector<std::string> names;
  for (const auto& event : events) {
    names.push_back(event["source"].get<std::string>() + " " +
                    event["metadata"]["state"].get<std::string>());
    CHECK(event["timestamp"] == 0);
    CHECK(event["metadata"]["run_id"] == "events");
    CHECK(event["metadata"]["rdzv_backend"] == "static");
  }
  // The first attempt: ranks 0 and 1 start, rank 1 fails (rank 0 has exited 0 by then or is
  // stopped); the second: both start again and succeed; then the agent's end.
  REQUIRE(names.size() >= 11);
  CHECK(std::vector<std::string>(names.begin(), names.begin() + 5) ==
        std::vector<std::string>{"AGENT RENDEZVOUS", "AGENT ASSIGN_WORKER_RANKS", "WORKER START",
                                 "WORKER START", "WORKER FAILED"});
  CHECK(std::vector<std::string>(names.end() - 7, names.end()) ==
        std::vector<std::string>{"AGENT RENDEZVOUS", "AGENT ASSIGN_WORKER_RANKS", "WORKER START",
                                 "WORKER START", "WORKER SUCCEEDED", "WORKER SUCCEEDED",
                                 "AGENT SUCCEEDED"});
  const nlohmann::json& failed = events[4];
  CHECK(failed["metadata"]["global_rank"] == 1);
  auto inner = nlohmann::json::parse(failed["metadata"]["metadata"].get<std::string>());
  CHECK(inner["exit_code"] == nlohmann::json::array({4}));
  CHECK(inner["local_rank"] == nlohmann::json::array({1}));
  CHECK(inner["worker_pid"][0] == std::stoi(failed["metadata"]["worker_id"].get<std::string>()));
  CHECK(events.back()["metadata"]["agent_restarts"] == 1);
  CHECK(events[events.size() - 7]["metadata"]["duration_ms"].is_number());

  // The default, null, records nothing.
  r = Run(Mxrun({"--nproc_per_node=1"}, {}));
  CHECK(r.exit_code == 0);
  CHECK(Events(r.err).empty());
  // An unknown handler is refused with the accepted ones.
  r = Run(Mxrun({"--event-log-handler=dynamic_rendezvous"}, {}));
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Catch::Contains("accepted: null, console"));
}

TEST_CASE("numa binding on this machine: each worker on the CPUs hwloc reports",
          "[integration][torchrun2][numa]") {
  const std::string mode = GENERATE(as<std::string>{}, "node", "socket", "exclusive");
  ProcessResult hwloc = Run({"hwloc-calc", "--physical-output", "--intersect", "pu", "all"});
  REQUIRE(hwloc.exit_code == 0);
  std::string cpus = hwloc.out.substr(0, hwloc.out.find('\n'));
  ProcessResult r =
      Run(MxrunShell({"--nproc_per_node=2", "--numa-binding=" + mode, "--log_collapse_window=0"},
                     "grep Cpus_allowed_list /proc/self/status"));
  INFO(Describe(r));
  REQUIRE(r.exit_code == 0);
  // No GPU here: nothing to bind, said in one line, and the workers keep every CPU.
  CHECK(CountOccurrences(r.err, "numa binding (" + mode + "): ") == 1);
  const std::string out = r.out;
  const std::regex allowed("Cpus_allowed_list:\\s+(\\S+)");
  int workers = 0;
  for (std::sregex_iterator it(out.begin(), out.end(), allowed); it != std::sregex_iterator();
       ++it) {
    ++workers;
    std::string list = (*it)[1];
    std::replace(list.begin(), list.end(), '-', ',');  // "0-1" and hwloc's "0,1" (two CPUs)
    CHECK(list == cpus);
  }
  CHECK(workers == 2);
}

TEST_CASE("numa binding puts each worker near its GPU before exec (saved topology)",
          "[integration][torchrun2][numa]") {
  // Two NUMA nodes of one CPU each, GPU 0 on node 0 and GPU 1 on node 1 (tests/topologies/).
  cpu_set_t own;
  REQUIRE(sched_getaffinity(0, sizeof own, &own) == 0);
  if (!CPU_ISSET(0, &own) || !CPU_ISSET(1, &own)) {
    WARN("this machine does not let the test use CPUs 0 and 1: skipped");
    return;
  }
  const std::string xml = std::string(TOPOLOGIES_DIR) + "/two_cpu_2gpu.xml";
  // (CUDA_VISIBLE_DEVICES, the CPU each of the two workers must be bound to)
  auto [visible, expected] = GENERATE(
      table<std::string, std::vector<std::string>>({{"", {"0", "1"}}, {"1,0", {"1", "0"}}}));
  std::map<std::string, std::string> env = {{"HWLOC_XMLFILE", xml}};
  if (!visible.empty()) env["CUDA_VISIBLE_DEVICES"] = visible;
  // Workers print their affinity, that of a child they start, and their memory policy.
  ProcessResult r =
      Run(MxrunShell({"--nproc_per_node=2", "--numa_binding=node"},
                     "echo rank=$RANK $(grep Cpus_allowed_list /proc/self/status | cut -f2) "
                     "child=$(sh -c 'grep Cpus_allowed_list /proc/self/status' | cut -f2) "
                     "policy=$(head -1 /proc/self/numa_maps | cut -d' ' -f2)"),
          env);
  INFO(Describe(r));
  REQUIRE(r.exit_code == 0);
  for (int rank = 0; rank < 2; ++rank) {
    const std::string cpu = expected[rank];
    CHECK_THAT(r.out,
               Catch::Contains("rank=" + std::to_string(rank) + " " + cpu + " child=" + cpu));
  }
  // Node 0 exists here: the worker on it prefers it; node 1 does not, and the line says so.
  const int on_node_0 = expected[0] == "0" ? 0 : 1;
  CHECK_THAT(r.out, Catch::Contains("rank=" + std::to_string(on_node_0) + " " +
                                    "0 child=0 "
                                    "policy=prefer:0"));
  CHECK_THAT(r.err, Catch::Contains("-> CPUs 1, memory anywhere (node 1 not allowed)"));
}

TEST_CASE("a torchrun 2.11 launch line from a public training repository runs unchanged",
          "[integration][torchrun2]") {
  // torchtitan's graph_trainer run script: one node, c10d on localhost:0 without --rdzv_id,
  // virtual local ranks, the console showing rank 0 only, tee'd, a module entrypoint with its
  // own --module flag after it.
  TempDir dir;
  {
    std::ofstream module(dir.path() + "/toy_train.py");
    module << "import os, sys\n"
              "print('rank', os.environ['RANK'], 'local', os.environ['LOCAL_RANK'], 'device',\n"
              "      os.environ['CUDA_VISIBLE_DEVICES'], 'args', ' '.join(sys.argv[1:]), "
              "flush=True)\n";
  }
  ProcessResult r = Run({kMxrun,
                         "--nproc_per_node=2",
                         "--rdzv_backend",
                         "c10d",
                         "--rdzv_endpoint=localhost:0",
                         "--virtual-local-rank",
                         "--local-ranks-filter",
                         "0",
                         "--role",
                         "rank",
                         "--tee",
                         "3",
                         "--log-dir",
                         dir.path() + "/logs",
                         "-m",
                         "toy_train",
                         "--module",
                         "graph_trainer.llama3",
                         "--training.steps",
                         "10"},
                        {{"PYTHONPATH", dir.path()}, {"CUDA_VISIBLE_DEVICES", "2,3"}});
  INFO(Describe(r));
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("rank 0 local 0 device 2 args --module graph_trainer.llama3 "
                                    "--training.steps 10"));
  CHECK(CountOccurrences(r.out, "rank 1 ") == 0);  // filtered from the console
  const std::string run_dir = RunDir(r.err);
  CHECK_THAT(ReadFile(run_dir + "/attempt_0/1/stdout.log"),
             Catch::Contains("rank 1 local 0 device 3"));  // but in its log file
}

TEST_CASE("logs-specs with a name is refused with what to use instead, the default accepted",
          "[integration][torchrun2]") {
  ProcessResult r = Run(Mxrun({"--logs-specs=my_company_specs"}, {}));
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Catch::Contains("mxrun cannot load torchrun.logs_specs entry points") &&
                        Catch::Contains("--log_dir") && Catch::Contains("--log_format=json") &&
                        !Catch::Contains("unknown flag"));
  CHECK(Run(Mxrun({"--logs_specs="}, {})).exit_code != 0);  // CLI11: an empty value is refused
  CHECK(Run(Mxrun({}, {}), {{"PET_LOGS_SPECS", ""}}).exit_code == 0);
}

TEST_CASE("numa binding finds each worker's GPU through NVML: indices, UUIDs, prefixes, MIG",
          "[integration][torchrun2][numa]") {
  // tests/fake_nvml.cc stands in for the driver: two GPUs placed on two real PCI devices of this
  // machine, so that hwloc finds their CPUs on the machine itself. exclusive splits the one NUMA
  // node's cores between them in bus order: 0000:00:02.0 gets the first core, 0000:00:03.0 the
  // second.
  cpu_set_t own;
  REQUIRE(sched_getaffinity(0, sizeof own, &own) == 0);
  for (const char* device : {"0000:00:02.0", "0000:00:03.0"}) {
    if (access((std::string("/sys/bus/pci/devices/") + device + "/local_cpus").c_str(), R_OK) !=
            0 ||
        CPU_COUNT(&own) != 2 || !CPU_ISSET(0, &own) || !CPU_ISSET(1, &own)) {
      WARN("this machine is not the two-CPU one with PCI devices 00:02.0 and 00:03.0: skipped");
      return;
    }
  }
  // (CUDA_VISIBLE_DEVICES, the CPU of worker 0 and of worker 1)
  auto [visible, expected] = GENERATE(table<std::string, std::vector<std::string>>({
      {"", {"1", "0"}},  // NVML index 0 is 00:03.0
      {"1,0", {"0", "1"}},
      {"GPU-bbbb-2222-3333,GPU-aaaa-1111-2222", {"0", "1"}},
      {"GPU-bbbb,GPU-aaaa", {"0", "1"}},                      // unique prefixes, as CUDA takes them
      {"MIG-cccc-4444-5555,GPU-aaaa-1111-2222", {"0", "1"}},  // a MIG instance: its parent GPU
  }));
  std::map<std::string, std::string> env = {
      {"LD_LIBRARY_PATH", mxrun::testing::FakeNvmlLibraryPath()},
      {"FAKE_NVML_DEVICES",
       "GPU-aaaa-1111-2222@0000:00:03.0,GPU-bbbb-2222-3333@0000:00:02.0+MIG-cccc-4444-5555"}};
  if (!visible.empty()) env["CUDA_VISIBLE_DEVICES"] = visible;
  ProcessResult r =
      Run(MxrunShell({"--nproc_per_node=gpu", "--numa-binding=exclusive"},
                     "echo rank=$RANK cpus=$(grep Cpus_allowed_list /proc/self/status "
                     "| cut -f2)"),
          env);
  INFO("CUDA_VISIBLE_DEVICES=" << visible << "\n" << Describe(r));
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("rank=0 cpus=" + expected[0]));
  CHECK_THAT(r.out, Catch::Contains("rank=1 cpus=" + expected[1]));
  CHECK(CountOccurrences(r.err, "numa binding (exclusive): local rank 0 (GPU 0000:00:0") == 1);
  // An ambiguous prefix names no GPU: that worker is not bound, and says so (the health checks,
  // which would keep such a node out, are off here: tests/integration/health_check_test.cc).
  env["CUDA_VISIBLE_DEVICES"] = "GPU-,GPU-aaaa";
  r = Run(
      MxrunShell({"--nproc_per_node=2", "--numa-binding=exclusive", "--health_checks=off"}, "true"),
      env);
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.err, Catch::Contains("local rank 0: no GPU, not bound"));
}
