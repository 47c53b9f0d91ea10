// Metrics endpoints (issue 26) against real clients: a real Prometheus server scrapes a running
// two-node job's master and agents, and the values are read back through Prometheus's query API.

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "rendezvous/net.h"
#include "tests/master.h"
#include "tests/metrics_client.h"
#include "tests/prometheus_server.h"
#include "tests/subprocess.h"

using mxrun::testing::AgentMetricsEndpoint;
using mxrun::testing::CountOccurrences;
using mxrun::testing::Curl;
using mxrun::testing::IntsAfter;
using mxrun::testing::Master;
using mxrun::testing::PageWithSamples;
using mxrun::testing::ProcessResult;
using mxrun::testing::PrometheusServer;
using mxrun::testing::Subprocess;
using namespace std::chrono_literals;

namespace {

std::unique_ptr<Subprocess> MetricsAgent(const std::string& endpoint, const std::string& run_id) {
  return std::make_unique<Subprocess>(mxrun::testing::MxrunWithChild(
      {"--rdzv_backend=c10d", "--rdzv_endpoint=" + endpoint, "--rdzv_id=" + run_id, "--nnodes=1:2",
       "--nproc_per_node=2", "--max_restarts=3", "--rdzv_conf=is_host=0", "--metrics_port=0"},
      {"--ready", "--sleep=120", "--progress=0.2"}));
}

}  // namespace

TEST_CASE(
    "Prometheus scrapes a two-node job: restarts after a killed worker, world size after a "
    "lost node",
    "[metrics][prometheus]") {
  Master master;
  const std::string master_metrics = master.MetricsEndpoint();
  std::vector<std::unique_ptr<Subprocess>> agents;
  for (int i = 0; i < 2; ++i) agents.push_back(MetricsAgent(master.endpoint(), "prom1"));
  for (auto& agent : agents) REQUIRE(agent->WaitForStdout("world=4", 2, 60s));
  const std::string agent0 = AgentMetricsEndpoint(*agents[0]);
  const std::string agent1 = AgentMetricsEndpoint(*agents[1]);

  // The endpoint itself: the classic text format unless OpenMetrics is asked for.
  const std::string text = Curl("http://" + agent0 + "/metrics");
  CHECK_THAT(text, Catch::Contains("# TYPE mxrun_agent_restarts_total counter"));
  CHECK_THAT(text, !Catch::Contains("# EOF"));
  const std::string open =
      Curl("http://" + agent0 + "/metrics", "application/openmetrics-text;version=1.0.0");
  CHECK_THAT(open, Catch::Contains("# TYPE mxrun_agent_restarts counter"));
  CHECK_THAT(open, Catch::EndsWith("# EOF\n"));
  CHECK_THAT(Curl("http://" + agent0 + "/nothing"), Catch::Contains("no page at /nothing"));

  PrometheusServer prometheus({{"master", master_metrics}, {"agent0", agent0}, {"agent1", agent1}});
  INFO("prometheus targets: " << prometheus.Targets());
  REQUIRE(prometheus.WaitForValue("sum(up)", 3));
  CHECK(prometheus.WaitForValue("mxrun_run_world_size{run_id=\"prom1\"}", 4));
  CHECK(prometheus.WaitForValue("count(mxrun_worker_step{run_id=\"prom1\"} > 0)", 4));
  CHECK(prometheus.WaitForValue("sum(mxrun_agent_workers_running{run_id=\"prom1\"})", 4));
  CHECK(prometheus.WaitForValue(
      "count(mxrun_worker_resident_memory_bytes{run_id=\"prom1\"} > 100000)", 4));

  // A worker killed: one restart, counted by the master and by both agents.
  const std::vector<int> pids = IntsAfter(agents[0]->out(), " pid");
  REQUIRE(pids.size() == 2);
  REQUIRE(kill(pids[0], SIGKILL) == 0);
  for (auto& agent : agents) REQUIRE(agent->WaitForStdout("attempt=1", 2, 60s));
  CHECK(prometheus.WaitForValue("mxrun_run_restarts_total{run_id=\"prom1\"}", 1));
  CHECK(prometheus.WaitForValue("mxrun_run_restarts_remaining{run_id=\"prom1\"}", 2));
  CHECK(prometheus.WaitForValue("mxrun_run_failures_total{run_id=\"prom1\",cause=\"signal\"}", 1));
  CHECK(prometheus.WaitForValue("sum(mxrun_agent_restarts_total{run_id=\"prom1\"})", 2));
  CHECK(prometheus.WaitForValue(
      "sum(mxrun_agent_worker_failures_total{run_id=\"prom1\",cause=\"signal\"})", 1));
  // Both nodes saw their group's first step after the failure.
  CHECK(prometheus.WaitForValue("sum(mxrun_agent_recovery_seconds_count{run_id=\"prom1\"})", 2));
  // And timed each phase of that restart: one sample per node and phase.
  for (const char* phase : {"stop", "reform", "start", "first_step"}) {
    CHECK(prometheus.WaitForValue(
        std::string("sum(mxrun_agent_restart_phase_seconds_count{run_id=\"prom1\",phase=\"") +
            phase + "\"})",
        2));
  }

  // A node lost: its agent killed outright. The survivor re-forms alone.
  REQUIRE(kill(agents[1]->pid(), SIGKILL) == 0);
  agents[1]->Wait(30s);
  CHECK(prometheus.WaitForValue("mxrun_run_world_size{run_id=\"prom1\"}", 2));
  CHECK(
      prometheus.WaitForValue("mxrun_run_failures_total{run_id=\"prom1\",cause=\"node_lost\"}", 1));
  CHECK(prometheus.WaitForValue("up{job=\"agent1\"}", 0));
  CHECK(prometheus.WaitForValue("mxrun_agent_world_size{job=\"agent0\"}", 2));
  // The lost node's failure did not spend the budget.
  CHECK(prometheus.Query("mxrun_run_restarts_total{run_id=\"prom1\"}").at(0).value == 1);

  kill(agents[0]->pid(), SIGTERM);
  ProcessResult last = agents[0]->Wait(30s);
  CHECK(last.exit_code == 143);
}

TEST_CASE("metrics flags: bad values are refused with what is accepted", "[metrics]") {
  ProcessResult bad = mxrun::testing::Run(
      mxrun::testing::MxrunWithChild({"--standalone", "--metrics_port=70000"}, {}), {}, 20s);
  CHECK(bad.exit_code == 2);
  CHECK_THAT(bad.err, Catch::Contains("--metrics_port='70000' is not valid: out of range; "
                                      "accepted: a port from 1 to 65535, or 0 for a free one"));
  ProcessResult lonely = mxrun::testing::Run(
      mxrun::testing::MxrunWithChild({"--standalone", "--metrics_bind_all"}, {}), {}, 20s);
  CHECK(lonely.exit_code == 2);
  CHECK_THAT(lonely.err, Catch::Contains("--metrics_bind_all needs --metrics_port"));
  ProcessResult no_tls = mxrun::testing::Run(
      mxrun::testing::MxrunWithChild({"--standalone", "--metrics_port=0", "--metrics_tls"}, {}), {},
      20s);
  CHECK(no_tls.exit_code == 2);
  CHECK_THAT(no_tls.err, Catch::Contains("this job has none"));
  ProcessResult master_bad =
      mxrun::testing::Run({MXRUN_MASTER_BIN, "--port=0", "--metrics_port=x"}, {}, 20s);
  CHECK(master_bad.exit_code == 2);
  CHECK_THAT(master_bad.err, Catch::Contains("--metrics_port='x' is not valid: not an integer; "
                                             "accepted: a port from 1 to 65535, 0 for a free one, "
                                             "or off"));
  // The environment form, for a service unit: the same check, and a port when it is one.
  ProcessResult env_bad = mxrun::testing::Run({MXRUN_MASTER_BIN, "--port=0"},
                                              {{"MXRUN_MASTER_METRICS_PORT", "x"}}, 20s);
  CHECK(env_bad.exit_code == 2);
  CHECK_THAT(env_bad.err, Catch::Contains("MXRUN_MASTER_METRICS_PORT='x' is not valid"));
  Subprocess env_off({MXRUN_MASTER_BIN, "--port=0"}, {{"MXRUN_MASTER_METRICS_PORT", "off"}});
  REQUIRE(env_off.WaitForStdout("listening on", 1, 10s));
  kill(env_off.pid(), SIGTERM);
  ProcessResult off = env_off.Wait(10s);
  CHECK(off.exit_code == 0);
  CHECK_THAT(off.out, !Catch::Contains("metrics at"));  // without it: a free port (--port=0)
}

TEST_CASE("a single-node job with --metrics_port serves its workers' progress and ends cleanly",
          "[metrics]") {
  Subprocess job(
      mxrun::testing::MxrunWithChild({"--standalone", "--nproc_per_node=2", "--metrics_port=0"},
                                     {"--ready", "--sleep=2", "--progress=0.1"}));
  const std::string endpoint = AgentMetricsEndpoint(job);
  REQUIRE(job.WaitForStdout("ready", 2, 30s));
  const std::string page = PageWithSamples(endpoint, "mxrun_worker_step", 2);
  INFO(page);
  CHECK(CountOccurrences(page, "mxrun_worker_step{") == 2);
  CHECK(CountOccurrences(page, "mxrun_worker_heartbeat_age_seconds{") == 2);
  CHECK_THAT(page, Catch::Contains("mxrun_agent_world_size{run_id=\""));
  CHECK_THAT(page, Catch::Contains("mxrun_agent_goodput_seconds_total{run_id=\""));
  CHECK_THAT(page, Catch::Contains("# TYPE mxrun_agent_goodput_ratio gauge"));
  ProcessResult r = job.Wait(30s);
  CHECK(r.exit_code == 0);
  // The end-of-job goodput line: the workers reported steps, so start-up is told apart.
  CHECK_THAT(r.err, Catch::Contains("goodput "));
  CHECK_THAT(r.err, Catch::Contains("s training, "));
  CHECK_THAT(r.err, !Catch::Contains("no progress reports"));
  // Served by the lean launcher itself (no TLS asked for).
  CHECK_THAT(r.err, Catch::Contains("serving Prometheus metrics at http://127.0.0.1:"));
}

TEST_CASE(
    "mxrun-master serves its metrics over mutual TLS: Prometheus with the job's "
    "certificates scrapes them, a client without one is refused",
    "[metrics][prometheus]") {
  mxrun::testing::TempDir certs;
  const std::string make = std::string(SCRIPTS_DIR) + "/make-certs.sh";
  REQUIRE(mxrun::testing::Run({make, certs.path(), "ca"}, {}, 30s).exit_code == 0);
  REQUIRE(
      mxrun::testing::Run({make, certs.path(), "node", "master", "127.0.0.1", "localhost"}, {}, 30s)
          .exit_code == 0);
  REQUIRE(mxrun::testing::Run({make, certs.path(), "node", "scraper", "127.0.0.1"}, {}, 30s)
              .exit_code == 0);
  const std::string dir = certs.path();
  Master master({.extra = {"--cert=" + dir + "/master.pem", "--key=" + dir + "/master.key",
                           "--cacert=" + dir + "/ca.pem", "--metrics_tls"}});
  const std::string endpoint = master.MetricsEndpoint();
  // With the job's certificates: the page.
  const std::string page =
      mxrun::testing::Run(
          {"curl", "-s", "--max-time", "5", "--cacert", dir + "/ca.pem", "--cert",
           dir + "/scraper.pem", "--key", dir + "/scraper.key", "https://" + endpoint + "/metrics"},
          {}, 10s)
          .out;
  CHECK_THAT(page, Catch::Contains("# TYPE mxrun_master_runs gauge"));
  // Without a client certificate, or in plain HTTP: nothing.
  ProcessResult anonymous =
      mxrun::testing::Run({"curl", "-s", "--max-time", "5", "--cacert", dir + "/ca.pem",
                           "https://" + endpoint + "/metrics"},
                          {}, 10s);
  CHECK(anonymous.exit_code != 0);
  CHECK_THAT(anonymous.out, !Catch::Contains("mxrun_master_runs"));
  ProcessResult plain = mxrun::testing::Run(
      {"curl", "-s", "--max-time", "5", "http://" + endpoint + "/metrics"}, {}, 10s);
  CHECK_THAT(plain.out, !Catch::Contains("mxrun_master_runs"));
  // A real Prometheus, scraping over HTTPS with a certificate from the job's CA.
  PrometheusServer prometheus(
      {{"master", endpoint}},
      PrometheusServer::Tls{dir + "/ca.pem", dir + "/scraper.pem", dir + "/scraper.key"});
  INFO("prometheus targets: " << prometheus.Targets());
  CHECK(prometheus.WaitForValue("up{job=\"master\"}", 1));
  CHECK(prometheus.WaitForValue("mxrun_master_runs{phase=\"running\"}", 0));
}

TEST_CASE(
    "mxrun status --json gives scripts the runs with failures by cause, --watch repeats it "
    "until interrupted",
    "[metrics]") {
  Master master;
  std::vector<std::unique_ptr<Subprocess>> agents;
  for (int i = 0; i < 2; ++i) agents.push_back(MetricsAgent(master.endpoint(), "json1"));
  for (auto& agent : agents) REQUIRE(agent->WaitForStdout("world=4", 2, 60s));
  const std::vector<int> pids = IntsAfter(agents[1]->out(), " pid");
  REQUIRE(pids.size() == 2);
  REQUIRE(kill(pids[1], SIGKILL) == 0);
  for (auto& agent : agents) REQUIRE(agent->WaitForStdout("attempt=1", 2, 60s));
  ProcessResult status = mxrun::testing::Run(
      {MXRUN_BIN, "status", "--rdzv_endpoint=" + master.endpoint(), "--json"}, {}, 20s);
  INFO(status.out << status.err);
  REQUIRE(status.exit_code == 0);
  const nlohmann::json reply = nlohmann::json::parse(status.out);
  CHECK(reply["master"] == master.endpoint());
  REQUIRE(reply["runs"].size() == 1);
  const nlohmann::json& run = reply["runs"][0];
  CHECK(run["run_id"] == "json1");
  CHECK(run["phase"] == "running");
  CHECK(run["world_size"] == 4);
  CHECK(run["restarts_spent"] == 1);
  CHECK(run["failures"]["signal"] == 1);
  CHECK(run["members"].size() == 2);
  CHECK(run["members"][0]["state"] == "running");
  // The text form says the same.
  ProcessResult text =
      mxrun::testing::Run({MXRUN_BIN, "status", "--rdzv_endpoint=" + master.endpoint()}, {}, 20s);
  CHECK_THAT(text.out, Catch::Contains("  failures: signal 1"));
  // The recovery: the re-formed group's first reported step, seconds after the failure.
  double recovered = -1;
  for (int i = 0; i < 50 && recovered < 0; ++i) {
    ProcessResult again = mxrun::testing::Run(
        {MXRUN_BIN, "status", "--rdzv_endpoint=" + master.endpoint(), "--json"}, {}, 20s);
    const nlohmann::json r = nlohmann::json::parse(again.out)["runs"][0];
    if (r["last_recovery_s"].is_number()) recovered = r["last_recovery_s"].get<double>();
    if (recovered < 0) usleep(200'000);
  }
  CHECK(recovered > 0);
  CHECK(recovered < 30);
  // The restart phase by phase: both nodes timed it, the master shows the slowest of each phase.
  nlohmann::json restart;
  for (int i = 0; i < 50; ++i) {
    ProcessResult again = mxrun::testing::Run(
        {MXRUN_BIN, "status", "--rdzv_endpoint=" + master.endpoint(), "--json"}, {}, 20s);
    const nlohmann::json r = nlohmann::json::parse(again.out)["runs"][0];
    if (!r["restarts"].empty() && r["restarts"][0]["nodes"] == 2) {
      restart = r["restarts"][0];
      break;
    }
    usleep(200'000);
  }
  INFO("restart: " << restart.dump());
  REQUIRE(restart.is_object());
  CHECK(restart["round"] == 1);
  CHECK(restart["in_process"] == false);
  CHECK_THAT(restart["cause"].get<std::string>(), !Catch::Equals(""));
  for (const char* phase : {"stop_s", "reform_s", "start_s", "first_step_s"}) {
    INFO(phase);
    REQUIRE(restart[phase].is_number());
    CHECK(restart[phase].get<double>() >= 0);
  }
  CHECK(restart["total_s"].get<double>() ==
        Approx(restart["stop_s"].get<double>() + restart["reform_s"].get<double>() +
               restart["start_s"].get<double>() + restart["first_step_s"].get<double>()));
  ProcessResult phases =
      mxrun::testing::Run({MXRUN_BIN, "status", "--rdzv_endpoint=" + master.endpoint()}, {}, 20s);
  CHECK_THAT(phases.out, Catch::Contains("  restart (round 1, slowest of 2 nodes; ") &&
                             Catch::Contains("first step "));
  // --watch: shown again and again until SIGINT, then exit 0.
  Subprocess watch(
      {MXRUN_BIN, "status", "--rdzv_endpoint=" + master.endpoint(), "--json", "--watch=0.2"});
  REQUIRE(watch.WaitForStdout("\"run_id\":\"json1\"", 3, 20s));
  kill(watch.pid(), SIGINT);
  ProcessResult watched = watch.Wait(10s);
  CHECK(watched.exit_code == 0);
  for (auto& agent : agents) kill(agent->pid(), SIGTERM);
  for (auto& agent : agents) CHECK(agent->Wait(30s).exit_code == 143);
}

TEST_CASE(
    "the master's status page, rendered by a real headless Chromium, shows the ranks and "
    "the failure",
    "[metrics][browser]") {
  Master master;
  const std::string endpoint = master.MetricsEndpoint();
  std::vector<std::unique_ptr<Subprocess>> agents;
  for (int i = 0; i < 2; ++i) agents.push_back(MetricsAgent(master.endpoint(), "page1"));
  for (auto& agent : agents) REQUIRE(agent->WaitForStdout("world=4", 2, 60s));
  const std::vector<int> pids = IntsAfter(agents[0]->out(), " pid");
  REQUIRE(pids.size() == 2);
  REQUIRE(kill(pids[0], SIGKILL) == 0);
  for (auto& agent : agents) REQUIRE(agent->WaitForStdout("attempt=1", 2, 60s));
  // Every rank of the new round has reported progress through its agent's heartbeats.
  size_t ranks = 0;
  std::string last_status;
  for (int i = 0; i < 60 && ranks < 4; ++i) {
    ProcessResult status = mxrun::testing::Run(
        {MXRUN_BIN, "status", "--rdzv_endpoint=" + master.endpoint(), "--json"}, {}, 20s);
    last_status = status.out + status.err;
    ranks = 0;
    const nlohmann::json reply = nlohmann::json::parse(status.out);
    for (const nlohmann::json& m : reply["runs"][0]["members"]) ranks += m["ranks"].size();
    if (ranks < 4) usleep(250'000);
  }
  INFO(last_status);
  REQUIRE(ranks == 4);

  // Chromium's profile in a folder of the test's own (never the machine's ~/.config).
  mxrun::testing::TempDir profile;
  const std::string out_dir = TEST_OUTPUT_DIR;
  mxrun::testing::Run({"mkdir", "-p", out_dir}, {}, 10s);
  const std::string shot = out_dir + "/status_page.png";
  std::remove(shot.c_str());
  const std::vector<std::string> chromium{"chromium",
                                          "--headless",
                                          "--no-sandbox",
                                          "--disable-gpu",
                                          "--no-first-run",
                                          "--user-data-dir=" + profile.path(),
                                          "--window-size=1200,900"};
  std::vector<std::string> dump = chromium;
  dump.insert(dump.end(), {"--dump-dom", "http://" + endpoint + "/"});
  ProcessResult dom = mxrun::testing::Run(dump, {}, 60s);
  INFO(dom.out << dom.err);
  REQUIRE(dom.exit_code == 0);
  CHECK_THAT(dom.out, Catch::Contains("run page1: <span class=\"phase-running\">running</span>"));
  CHECK_THAT(dom.out, Catch::Contains("world size 4, restarts 1 of 3; failures: signal 1"));
  CHECK_THAT(dom.out, Catch::Contains("<td>0-1</td>"));
  CHECK_THAT(dom.out, Catch::Contains("<td>2-3</td>"));
  CHECK_THAT(dom.out, Catch::Contains("failure: worker rank "));
  CHECK_THAT(dom.out, Catch::Contains("Signal 9 (SIGKILL)"));
  CHECK_THAT(dom.out, Catch::Contains("round: round 1 formed: 2 nodes, world size 4"));
  CHECK_THAT(dom.out, Catch::Contains("recovered: round 1 reported its first steps "));
  // The ranks with their step rates and report ages; none a straggler.
  CHECK_THAT(dom.out, Catch::Contains("<th>steps/s</th><th>last report</th>"));
  CHECK(CountOccurrences(dom.out, " ago</td><td></td></tr>") == 4);
  CHECK_THAT(dom.out, !Catch::Contains("class=\"straggler\""));
  std::vector<std::string> screenshot = chromium;
  screenshot.insert(screenshot.end(), {"--screenshot=" + shot, "http://" + endpoint + "/"});
  ProcessResult shot_run = mxrun::testing::Run(screenshot, {}, 60s);
  CHECK(shot_run.exit_code == 0);
  // Not blank: a page that failed to render is one colour (scripts/docs/png_not_blank.py).
  ProcessResult blank = mxrun::testing::Run(
      {PYTHON_BIN, std::string(SCRIPTS_DIR) + "/docs/png_not_blank.py", shot}, {}, 30s);
  INFO(blank.out << blank.err);
  CHECK(blank.exit_code == 0);
  for (auto& agent : agents) kill(agent->pid(), SIGTERM);
  for (auto& agent : agents) CHECK(agent->Wait(30s).exit_code == 143);
}

TEST_CASE("an agent that hosts its job's master serves the master's metrics and status page too",
          "[metrics]") {
  absl::StatusOr<int> port = mxrun::PickFreePort("127.0.0.1");
  REQUIRE(port.ok());
  std::vector<std::unique_ptr<Subprocess>> agents;
  for (int i = 0; i < 2; ++i) {
    agents.push_back(std::make_unique<Subprocess>(mxrun::testing::MxrunWithChild(
        {"--rdzv_backend=c10d", "--rdzv_endpoint=127.0.0.1:" + std::to_string(*port),
         "--rdzv_id=hosted1", "--nnodes=2", "--nproc_per_node=2", "--metrics_port=0"},
        {"--ready", "--sleep=60", "--progress=0.2"})));
  }
  for (auto& agent : agents) REQUIRE(agent->WaitForStdout("world=4", 2, 60s));
  Subprocess* host = nullptr;
  for (auto& agent : agents) {
    agent->WaitForStderr("serving Prometheus metrics", 1, 10s);
    if (agent->err().find("hosting the rendezvous master") != std::string::npos) host = agent.get();
  }
  REQUIRE(host != nullptr);
  const std::string endpoint = AgentMetricsEndpoint(*host);
  const std::string text = Curl("http://" + endpoint + "/metrics");
  CHECK_THAT(text, Catch::Contains("mxrun_run_world_size{run_id=\"hosted1\"} 4\n"));
  CHECK_THAT(text, Catch::Contains("mxrun_agent_world_size{run_id=\"hosted1\",node=\"0\"} 4\n"));
  const std::string open =
      Curl("http://" + endpoint + "/metrics", "application/openmetrics-text;version=1.0.0");
  CHECK(CountOccurrences(open, "# EOF") == 1);
  CHECK_THAT(open, Catch::EndsWith("# EOF\n"));
  CHECK_THAT(open, Catch::Contains("mxrun_run_world_size{run_id=\"hosted1\"} 4\n"));
  CHECK_THAT(Curl("http://" + endpoint + "/"), Catch::Contains("run hosted1: "));
  // The other agent first: stopped after the host, it may see the master vanish before its own
  // SIGTERM arrives (the two kill calls are apart in time), and that is a rendezvous failure (3).
  for (auto& agent : agents) {
    if (agent.get() != host) kill(agent->pid(), SIGTERM);
  }
  for (auto& agent : agents) {
    if (agent.get() != host) CHECK(agent->Wait(30s).exit_code == 143);
  }
  kill(host->pid(), SIGTERM);
  CHECK(host->Wait(30s).exit_code == 143);
}
