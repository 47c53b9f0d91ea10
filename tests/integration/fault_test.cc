// Real network faults between real agents and a real master, with nothing faked inside mxrun:
//   - on 127.0.0.1, through the test's TCP proxy (tests/tcp_proxy.cc): one node's connection held
//     (a partition: no FIN, no RST), 200 ms of delay with 2 s stalls;
//   - in network namespaces joined by a bridge (tests/network_lab.h), when this machine allows them
//     (skipped with the reason otherwise): a node's switch port taken down and brought back, and
//     the master's host cut off from everyone, with a plain and with a durable master.
// Each case prints a "fault suite:" line with what it measured (docs/benchmarks/operations.md's
// table) and ends with nothing left running. Every wait is bounded.

#include <catch2/catch.hpp>

#include <signal.h>

#include <cstdio>
#include <memory>
#include <thread>

#include "tests/master.h"
#include "tests/network_lab.h"
#include "tests/subprocess.h"
#include "tests/temp_dir.h"

using namespace std::chrono_literals;
using mxrun::testing::CountOccurrences;
using mxrun::testing::IntsAfter;
using mxrun::testing::ListeningOn;
using mxrun::testing::Master;
using mxrun::testing::NetworkLab;
using mxrun::testing::ProcessResult;
using mxrun::testing::Subprocess;
using mxrun::testing::TempDir;
using Clock = std::chrono::steady_clock;

namespace {

constexpr auto kLease = 5s;  // the default: heartbeat every 1 s, 5 missed

std::vector<std::string> Agent(const std::string& endpoint, const std::string& id,
                               const std::string& nnodes, const std::vector<std::string>& child,
                               const std::string& conf = "last_call_timeout=1") {
  return mxrun::testing::MxrunWithChild(
      {"--rdzv_backend=c10d", "--rdzv_endpoint=" + endpoint, "--rdzv_id=" + id,
       "--nnodes=" + nnodes, "--nproc_per_node=1", "--rdzv_conf=" + conf},
      child);
}

// The TCP proxy in front of `target`, on 127.0.0.1.
std::unique_ptr<Subprocess> Proxy(const std::string& target, std::vector<std::string> faults = {}) {
  std::vector<std::string> argv{TCP_PROXY_BIN, "--listen=127.0.0.1:0", "--to=" + target};
  argv.insert(argv.end(), faults.begin(), faults.end());
  auto proxy = std::make_unique<Subprocess>(argv);
  REQUIRE(proxy->WaitForStdout("listening on", 1, 10s));
  return proxy;
}

// The pid of the worker an agent's output last announced ("ready rank=R pid=P").
pid_t LastWorkerPid(const Subprocess& agent) {
  std::vector<int> pids = IntsAfter(agent.out(), " pid");
  REQUIRE_FALSE(pids.empty());
  return pids.back();
}

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// Network namespaces, or the reason there are none (the case then passes, saying so).
bool LabAvailable() {
  const std::string why = NetworkLab::Unavailable();
  if (!why.empty()) WARN("fault suite skipped: " << why);
  return why.empty();
}

// mxrun-master inside host 0 of `lab`, on its bridge address.
std::unique_ptr<Subprocess> MasterIn(const NetworkLab& lab, std::vector<std::string> more = {}) {
  std::vector<std::string> argv{MXRUN_MASTER_BIN, "--host=" + lab.Address(0), "--port=0"};
  argv.insert(argv.end(), more.begin(), more.end());
  auto master = std::make_unique<Subprocess>(lab.In(0, argv));
  REQUIRE(master->WaitForStdout("listening on", 1, 10s));
  return master;
}

}  // namespace

TEST_CASE(
    "a node whose connection to the master is held stops its workers within the lease, "
    "the others re-form, and it rejoins when the connection returns",
    "[faults]") {
  Master master;
  auto proxy = Proxy(master.endpoint());
  const std::vector<std::string> child{"--ready", "--sleep=14"};
  Subprocess a(Agent(master.endpoint(), "held", "1:2", child));
  Subprocess b(Agent(ListeningOn(proxy->out()), "held", "1:2", child));
  REQUIRE(a.WaitForStdout("world=2", 1, 30s));
  REQUIRE(b.WaitForStdout("world=2", 1, 30s));
  const pid_t worker = LastWorkerPid(b);

  const auto cut = Clock::now();
  REQUIRE(kill(proxy->pid(), SIGUSR1) == 0);  // every byte between b and the master now waits
  REQUIRE(mxrun::testing::WaitForExit(worker, kLease + 10s));
  const double stopped = Seconds(Clock::now() - cut);
  CHECK(stopped < Seconds(kLease) + 3);         // within the lease, give or take a loaded machine
  REQUIRE(a.WaitForStdout("world=1", 1, 20s));  // the master declared b gone; a went on alone
  const double reformed = Seconds(Clock::now() - cut);
  CHECK(b.WaitForStderr("no word from the rendezvous master", 1, 5s));

  const auto back = Clock::now();
  REQUIRE(kill(proxy->pid(), SIGUSR2) == 0);
  REQUIRE(b.WaitForStdout("world=2", 2, 30s));
  const double rejoined = Seconds(Clock::now() - back);
  ProcessResult ra = a.Wait(60s);
  ProcessResult rb = b.Wait(60s);
  INFO(ra.err << rb.err);
  CHECK(ra.exit_code == 0);
  CHECK(rb.exit_code == 0);
  CHECK(IntsAfter(ra.out, "world") == std::vector<int>{2, 1, 2});
  CHECK(IntsAfter(rb.out, "world") == std::vector<int>{2, 2});
  CHECK(CountOccurrences(ra.out + rb.out, "attempt=1") == 0);  // no restart budget spent
  std::printf(
      "fault suite: connection held (proxy): workers stopped after %.2f s, others "
      "re-formed after %.2f s, rejoined %.2f s after release\n",
      stopped, reformed, rejoined);
}

TEST_CASE("200 ms of delay and 2 s stalls on one node's connection cause no false death",
          "[faults]") {
  Master master;
  // 200 ms each way on every chunk, and nothing at all for 2 s out of every 3 s.
  auto proxy =
      Proxy(master.endpoint(), {"--delay-ms=200", "--stall-ms=2000", "--stall-every-ms=3000"});
  const std::vector<std::string> child{"--ready", "--sleep=13"};
  const auto start = Clock::now();
  Subprocess a(Agent(master.endpoint(), "slow", "2", child));
  Subprocess b(Agent(ListeningOn(proxy->out()), "slow", "2", child));
  ProcessResult ra = a.Wait(90s);
  ProcessResult rb = b.Wait(90s);
  INFO(ra.err << rb.err);
  CHECK(ra.exit_code == 0);
  CHECK(rb.exit_code == 0);
  for (const ProcessResult* r : {&ra, &rb}) {
    CHECK(CountOccurrences(r->out, "ready rank=") == 1);  // one round, never re-formed
    CHECK_THAT(r->err, !Catch::Contains("re-forming"));
    CHECK_THAT(r->err, !Catch::Contains("no word from"));
  }
  std::printf(
      "fault suite: 200 ms delay + 2 s stalls every 3 s: no false death, job done in "
      "%.1f s\n",
      Seconds(Clock::now() - start));
}

TEST_CASE(
    "a partitioned host (switch port down): its agent stops its workers within the lease, "
    "the others re-form, and it rejoins when the link returns",
    "[faults][netns]") {
  if (!LabAvailable()) return;
  NetworkLab lab(4);  // host 0: the master; hosts 1-3: one agent each
  auto master = MasterIn(lab);
  const std::string endpoint = ListeningOn(master->out());
  const std::vector<std::string> child{"--ready", "--sleep=16"};
  std::vector<std::unique_ptr<Subprocess>> agents;
  for (int host = 1; host <= 3; ++host) {
    agents.push_back(std::make_unique<Subprocess>(
        lab.In(host, Agent(endpoint, "cut", "2:3", child, "last_call_timeout=5"))));
  }
  for (auto& agent : agents) REQUIRE(agent->WaitForStdout("world=3", 1, 30s));
  const pid_t worker = LastWorkerPid(*agents[2]);

  const auto cut = Clock::now();
  lab.SetLink(3, false);
  REQUIRE(mxrun::testing::WaitForExit(worker, kLease + 10s));
  const double stopped = Seconds(Clock::now() - cut);
  CHECK(stopped < Seconds(kLease) + 3);
  for (int i = 0; i < 2; ++i) REQUIRE(agents[i]->WaitForStdout("world=2", 1, 20s));
  const double reformed = Seconds(Clock::now() - cut);

  const auto back = Clock::now();
  lab.SetLink(3, true);
  for (auto& agent : agents) REQUIRE(agent->WaitForStdout("world=3", 2, 30s));
  const double rejoined = Seconds(Clock::now() - back);
  std::string all;
  for (auto& agent : agents) {
    ProcessResult r = agent->Wait(60s);
    INFO(r.err);
    CHECK(r.exit_code == 0);
    all += r.out;
  }
  CHECK_THAT(agents[0]->err(), Catch::Contains("no heartbeat for 5 s"));
  CHECK_THAT(agents[2]->err(), Catch::Contains("no word from the rendezvous master"));  // exited
  CHECK(CountOccurrences(all, "attempt=1") == 0);
  master->Wait(1ms);  // kill it (SIGKILL, by pid): the case is over
  for (int host = 0; host <= 3; ++host) CHECK(lab.Pids(host).empty());  // nothing left running
  std::printf(
      "fault suite: host partitioned (link down): its workers stopped after %.2f s, "
      "others re-formed after %.2f s, rejoined %.2f s after the link returned\n",
      stopped, reformed, rejoined);
}

TEST_CASE(
    "the master's host cut off from everyone: agents of a plain master stop their workers "
    "and exit 3 after the join timeout",
    "[faults][netns]") {
  if (!LabAvailable()) return;
  NetworkLab lab(3);
  auto master = MasterIn(lab);
  const std::string endpoint = ListeningOn(master->out());
  std::vector<std::unique_ptr<Subprocess>> agents;
  for (int host = 1; host <= 2; ++host) {
    agents.push_back(std::make_unique<Subprocess>(
        lab.In(host, Agent(endpoint, "lost", "2", {"--ready", "--sleep=60"}, "join_timeout=6"))));
  }
  std::vector<pid_t> workers;
  for (auto& agent : agents) {
    REQUIRE(agent->WaitForStdout("world=2", 1, 30s));
    workers.push_back(LastWorkerPid(*agent));
  }
  const auto cut = Clock::now();
  lab.SetLink(0, false);
  double stopped = 0;
  for (pid_t worker : workers) {
    REQUIRE(mxrun::testing::WaitForExit(worker, kLease + 10s));
    stopped = std::max(stopped, Seconds(Clock::now() - cut));
  }
  CHECK(stopped < Seconds(kLease) + 3);
  double exited = 0;
  for (auto& agent : agents) {
    ProcessResult r = agent->Wait(40s);
    exited = std::max(exited, Seconds(Clock::now() - cut));
    INFO(r.err);
    CHECK(r.exit_code == 3);
    CHECK_THAT(r.err, Catch::Contains("went silent"));
    CHECK_THAT(r.err, Catch::Contains("could not be reached again within 6 s"));
  }
  master->Wait(1ms);
  for (int host = 0; host <= 2; ++host) CHECK(lab.Pids(host).empty());
  std::printf(
      "fault suite: master's host cut off, plain master: workers stopped after %.2f s, "
      "agents exited 3 after %.2f s (lease + join timeout 6 s)\n",
      stopped, exited);
}

TEST_CASE(
    "the master's host cut off from everyone: agents of a durable master wait for it and "
    "the job goes on when it is back",
    "[faults][netns]") {
  if (!LabAvailable()) return;
  NetworkLab lab(3);
  TempDir dir;
  auto master = MasterIn(lab, {"--state_dir=" + dir.path() + "/state"});
  const std::string endpoint = ListeningOn(master->out());
  std::vector<std::unique_ptr<Subprocess>> agents;
  for (int host = 1; host <= 2; ++host) {
    agents.push_back(std::make_unique<Subprocess>(
        lab.In(host, Agent(endpoint, "durable", "2", {"--ready", "--sleep=12"}))));
  }
  for (auto& agent : agents) REQUIRE(agent->WaitForStdout("world=2", 1, 30s));
  const auto cut = Clock::now();
  lab.SetLink(0, false);
  for (auto& agent : agents) {
    REQUIRE(agent->WaitForStderr("no word from the rendezvous master", 1, kLease + 10s));
  }
  const double noticed = Seconds(Clock::now() - cut);
  std::this_thread::sleep_for(3s);  // the outage goes on past the lease (the fault's length)
  const auto back = Clock::now();
  lab.SetLink(0, true);
  for (auto& agent : agents) REQUIRE(agent->WaitForStdout("world=2", 2, 30s));
  const double resumed = Seconds(Clock::now() - back);
  for (auto& agent : agents) {
    ProcessResult r = agent->Wait(60s);
    INFO(r.err);
    CHECK(r.exit_code == 0);
    CHECK(CountOccurrences(r.out, "attempt=1") == 0);
  }
  kill(master->pid(), SIGTERM);
  master->Wait(10s);
  for (int host = 0; host <= 2; ++host) CHECK(lab.Pids(host).empty());
  std::printf(
      "fault suite: master's host cut off, durable master: agents stopped their workers "
      "after %.2f s, the job went on %.2f s after the link returned\n",
      noticed, resumed);
}
