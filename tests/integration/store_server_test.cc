// The workers' store (common/store/store_server) against real PyTorch clients of the project's
// environment (tests/python/store_clients.py: every TCPStore operation, many waiters, large values,
// init_process_group with TORCHELASTIC_USE_AGENT_STORE=True), and against raw sockets that break
// the protocol, never validate, never read their replies or vanish mid-wait: each is closed or
// paused alone while the others are served.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "common/store/store_server.h"
#include "tests/metrics_client.h"
#include "tests/subprocess.h"
#include "tests/temp_dir.h"

using mxrun::StoreServer;
using mxrun::testing::Describe;
using mxrun::testing::ProcessResult;
using mxrun::testing::Run;
using mxrun::testing::Subprocess;
using namespace std::chrono_literals;

namespace {

const std::string kClients = std::string(PYTHON_TESTS_DIR) + "/store_clients.py";

// A server with its log lines kept.
struct Served {
  std::mutex mutex;
  std::vector<std::string> lines;
  std::unique_ptr<StoreServer> server;

  explicit Served(StoreServer::Options options = {}) {
    options.log = [this](const std::string& line) {
      std::lock_guard<std::mutex> lock(mutex);
      lines.push_back(line);
    };
    auto started = StoreServer::Start(std::move(options));
    REQUIRE(started.ok());
    server = std::move(*started);
  }
  std::string Log() {
    std::lock_guard<std::mutex> lock(mutex);
    std::string all;
    for (const auto& line : lines) all += line + "\n";
    return all;
  }
  std::string port() const { return std::to_string(server->port()); }
};

// The clients' Python: the project's (PyTorch 2.13), or MXRUN_TEST_STORE_PYTHON's
// (scripts/check-torch215.sh runs the [store-clients] cases with .venv-cuda's, PyTorch 2.15.0).
std::string ClientPython() {
  const char* other = std::getenv("MXRUN_TEST_STORE_PYTHON");
  return other != nullptr && *other != '\0' ? other : PYTHON_BIN;
}

ProcessResult Clients(const std::vector<std::string>& args,
                      std::chrono::milliseconds timeout = 120s) {
  std::vector<std::string> argv{ClientPython(), kClients};
  argv.insert(argv.end(), args.begin(), args.end());
  return Run(argv, {}, timeout);
}

// Polls (bounded) until `holds`; the store's counts change on its own thread.
bool Eventually(const std::function<bool()>& holds, std::chrono::milliseconds timeout = 20s) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (holds()) return true;
    std::this_thread::sleep_for(10ms);
  }
  return holds();
}

int Connect(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0);
  return fd;
}

void SendAll(int fd, const std::string& bytes) {
  std::size_t sent = 0;
  while (sent < bytes.size()) {
    const ssize_t n = send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    REQUIRE(n > 0);
    sent += static_cast<std::size_t>(n);
  }
}

// True when the server closed `fd` (EOF or reset) within `timeout`.
bool ClosedByServer(int fd, std::chrono::milliseconds timeout) {
  pollfd p{fd, POLLIN, 0};
  if (poll(&p, 1, static_cast<int>(timeout.count())) <= 0) return false;
  char byte;
  return recv(fd, &byte, 1, 0) <= 0;
}

std::string Validate() {
  mxrun::StoreRequest request;
  request.op = mxrun::StoreOp::kValidate;
  request.word = mxrun::kStoreValidationMagic;
  return mxrun::EncodeStoreRequest(request);
}

}  // namespace

TEST_CASE("real PyTorch clients: every TCPStore operation against mxrun's store",
          "[store][store-clients]") {
  Served served;
  const ProcessResult result = Clients({"ops", "127.0.0.1", served.port()});
  INFO(Describe(result) << served.Log());
  REQUIRE(result.exit_code == 0);
  CHECK(result.out.find("all operations passed") != std::string::npos);
  CHECK(served.server->refused_clients() == 0);
  const mxrun::StoreCounts counts = served.server->Counts();
  CHECK(counts.requests[static_cast<int>(mxrun::StoreOp::kValidate)] >= 3);
  CHECK(counts.requests[static_cast<int>(mxrun::StoreOp::kBarrier)] == 3);
}

TEST_CASE("real PyTorch clients: 64 waiting on one key, then a barrier of 65",
          "[store][store-clients]") {
  Served served;
  const ProcessResult result = Clients({"waiters", "127.0.0.1", served.port(), "64"});
  INFO(Describe(result) << served.Log());
  REQUIRE(result.exit_code == 0);
  CHECK(result.out.find("waiters passed") != std::string::npos);
}

TEST_CASE("real PyTorch clients: 8 MiB values and 20,000 keys in one request",
          "[store][store-clients]") {
  Served served;
  const ProcessResult result = Clients({"large", "127.0.0.1", served.port()});
  INFO(Describe(result) << served.Log());
  REQUIRE(result.exit_code == 0);
  CHECK(result.out.find("large passed") != std::string::npos);
}

TEST_CASE(
    "init_process_group with TORCHELASTIC_USE_AGENT_STORE=True forms its groups on mxrun's "
    "store, rank 0 arriving last",
    "[store][store-clients]") {
  Served served;
  Subprocess rank1({ClientPython(), kClients, "group", "127.0.0.1", served.port(), "1", "2"});
  // Rank 1 is connected and waiting before rank 0 starts: the store listens for it all along.
  REQUIRE(Eventually([&] { return served.server->Counts().waiting_clients >= 1; }, 60s));
  const ProcessResult rank0 = Clients({"group", "127.0.0.1", served.port(), "0", "2"});
  const ProcessResult other = rank1.Wait(60s);
  INFO(Describe(rank0) << Describe(other) << served.Log());
  REQUIRE(rank0.exit_code == 0);
  REQUIRE(other.exit_code == 0);
  CHECK(rank0.out.find("rank 0: init_process_group, all_reduce") != std::string::npos);
  CHECK(served.server->refused_clients() == 0);
}

TEST_CASE("a client killed while it waits is dropped, the store serves the others on",
          "[store][store-clients]") {
  Served served;
  Subprocess holder({ClientPython(), kClients, "hold", "127.0.0.1", served.port(), "/never"});
  REQUIRE(holder.WaitForStdout("holding", 1, 60s));
  REQUIRE(Eventually([&] { return served.server->Counts().waiting_clients == 1; }));
  kill(holder.pid(), SIGKILL);
  holder.Wait(20s);
  REQUIRE(Eventually([&] {
    const auto counts = served.server->Counts();
    return counts.waiting_clients == 0 && counts.clients == 0;
  }));
  const ProcessResult result = Clients({"ops", "127.0.0.1", served.port()});
  INFO(Describe(result) << served.Log());
  CHECK(result.exit_code == 0);
  CHECK(served.server->refused_clients() == 0);  // going is no offence
}

TEST_CASE(
    "the store closes a connection that breaks the protocol at once, saying why, and one that "
    "never validates after its timeout",
    "[store]") {
  StoreServer::Options options;
  options.validate_timeout = 300ms;
  Served served(options);
  const int port = served.server->port();

  const int garbage = Connect(port);
  SendAll(garbage, "GET / HTTP/1.1\r\n\r\n");  // 'G' is operation 71
  CHECK(ClosedByServer(garbage, 5000ms));
  close(garbage);

  const int no_validate = Connect(port);
  SendAll(no_validate, std::string("\x07", 1));  // GETNUMKEYS first
  CHECK(ClosedByServer(no_validate, 5000ms));
  close(no_validate);

  const int huge_key = Connect(port);
  SendAll(huge_key, Validate() + std::string("\x03", 1));
  std::string length(8, '\0');
  const std::uint64_t too_long = 1 << 20;
  std::memcpy(length.data(), &too_long, 8);
  SendAll(huge_key, length);
  CHECK(ClosedByServer(huge_key, 5000ms));
  close(huge_key);

  const int silent = Connect(port);
  CHECK(ClosedByServer(silent, 5000ms));  // sent nothing: closed after 300 ms
  close(silent);

  const std::string log = served.Log();
  INFO(log);
  CHECK(log.find(": unknown operation 71 (TCPStore knows 0-18)") != std::string::npos);
  CHECK(log.find(": the first request was GETNUMKEYS, not VALIDATE") != std::string::npos);
  CHECK(log.find(": GET: a key of 1048576 bytes (at most 8192)") != std::string::npos);
  CHECK(log.find(": sent no VALIDATE within 300 ms of connecting") != std::string::npos);
  CHECK(served.server->refused_clients() == 4);
}

TEST_CASE(
    "a client that never reads its replies is paused alone: real clients are served meanwhile",
    "[store]") {
  StoreServer::Options options;
  options.max_output_bytes = 1 << 20;
  Served served(options);
  const int port = served.server->port();
  // A value of 1 MiB, then 64 GETs of it, none of whose replies it reads.
  const int hog = Connect(port);
  mxrun::StoreRequest set;
  set.op = mxrun::StoreOp::kSet;
  set.keys = {"/big"};
  set.values = {std::string(1 << 20, 'x')};
  mxrun::StoreRequest get;
  get.op = mxrun::StoreOp::kGet;
  get.keys = {"/big"};
  std::string gets;
  for (int i = 0; i < 64; ++i) gets += mxrun::EncodeStoreRequest(get);
  SendAll(hog, Validate() + mxrun::EncodeStoreRequest(set) + gets);

  const ProcessResult result = Clients({"ops", "127.0.0.1", std::to_string(port)});
  INFO(Describe(result) << served.Log());
  CHECK(result.exit_code == 0);
  CHECK(served.server->refused_clients() == 0);

  // Reading now, the hog gets all 64 replies: it was paused, not dropped.
  std::size_t received = 0;
  const std::size_t expected = 64 * (8 + (1 << 20));
  char buffer[65536];
  while (received < expected) {
    pollfd p{hog, POLLIN, 0};
    REQUIRE(poll(&p, 1, 10000) == 1);
    const ssize_t n = recv(hog, buffer, sizeof buffer, 0);
    REQUIRE(n > 0);
    received += static_cast<std::size_t>(n);
  }
  CHECK(received == expected);
  close(hog);
}

TEST_CASE(
    "at its client cap the store drops a connection that has not validated before refusing "
    "a newcomer",
    "[store]") {
  StoreServer::Options options;
  options.max_clients = 2;
  Served served(options);
  const int port = served.server->port();
  const int validated = Connect(port);
  SendAll(validated, Validate());
  REQUIRE(Eventually([&] { return served.server->Counts().requests[0] == 1; }));
  const int idle = Connect(port);  // connected, silent
  REQUIRE(Eventually([&] { return served.server->Counts().clients == 2; }));
  const int newcomer = Connect(port);
  CHECK(ClosedByServer(idle, 5000ms));
  SendAll(newcomer, Validate());
  REQUIRE(Eventually([&] { return served.server->Counts().requests[0] == 2; }));
  const int refused = Connect(port);  // both validated now: no room
  CHECK(ClosedByServer(refused, 5000ms));
  const std::string log = served.Log();
  INFO(log);
  CHECK(log.find("dropped, not validated, to make room: 2 clients are connected") !=
        std::string::npos);
  CHECK(log.find("refused a connection: 2 clients are connected (the most it takes)") !=
        std::string::npos);
  for (int fd : {validated, idle, newcomer, refused}) close(fd);
}

// The agent hosting the store (agent/store/workers_store_rendezvous.h), through mxrun itself.

TEST_CASE(
    "mxrun hosts the workers' store: TORCHELASTIC_USE_AGENT_STORE=True, a store per round, "
    "and rank 0 hosts it with --workers_store=rank0 or TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1",
    "[store][integration]") {
  mxrun::testing::TempDir dir;
  // Two rounds (the first fails): each round's workers get the agent's store of that round.
  ProcessResult r = Run(mxrun::testing::MxrunWithChild(
                            {"--standalone", "--nproc_per_node=2", "--max_restarts=1"},
                            {"--env-out=" + dir.path(), "--exit=1", "--fail-below-attempt=1"}),
                        {}, 60s);
  INFO(Describe(r));
  REQUIRE(r.exit_code == 0);
  const auto env = mxrun::testing::ReadEnvFile(dir.path() + "/env.0");
  CHECK(env.at("TORCHELASTIC_USE_AGENT_STORE") == "True");
  CHECK(env.at("MASTER_ADDR") == "localhost");

  for (const auto& [flags, extra] :
       std::vector<std::pair<std::vector<std::string>, std::map<std::string, std::string>>>{
           {{"--standalone", "--workers_store=rank0"}, {}},
           {{"--standalone"}, {{"TORCH_DISABLE_SHARE_RDZV_TCP_STORE", "1"}}}}) {
    mxrun::testing::TempDir other;
    ProcessResult rank0 =
        Run(mxrun::testing::MxrunWithChild(flags, {"--env-out=" + other.path()}), extra, 60s);
    INFO(Describe(rank0));
    REQUIRE(rank0.exit_code == 0);
    CHECK(mxrun::testing::ReadEnvFile(other.path() + "/env.0").at("TORCHELASTIC_USE_AGENT_STORE") ==
          "False");
  }
  ProcessResult bad = Run(mxrun::testing::MxrunWithChild({"--workers_store=nobody"}, {}), {}, 30s);
  CHECK(bad.exit_code == 2);
  CHECK(bad.err.find("--workers_store") != std::string::npos);
  CHECK(bad.err.find("agent or rank0") != std::string::npos);
}

TEST_CASE("mxrun with a --master_port that another process holds exits 3, naming the port",
          "[store][integration]") {
  // Hold a port as another job's store would.
  const int holder = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(bind(holder, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0);
  REQUIRE(listen(holder, 4) == 0);
  socklen_t length = sizeof address;
  getsockname(holder, reinterpret_cast<sockaddr*>(&address), &length);
  const std::string port = std::to_string(ntohs(address.sin_port));
  ProcessResult r = Run(mxrun::testing::MxrunWithChild({"--master_port=" + port}, {}), {}, 30s);
  close(holder);
  INFO(Describe(r));
  CHECK(r.exit_code == 3);
  CHECK(r.err.find("the workers' store: cannot listen on 127.0.0.1:" + port +
                   ": Address already in use (--master_port is taken?") != std::string::npos);
}

TEST_CASE("an agent's metrics show its workers' store: clients, waiters and requests by operation",
          "[store][integration][metrics]") {
  // Two workers that connect to the round's store (MASTER_PORT) and wait on a key nobody sets.
  const std::string hold = "exec '" + ClientPython() + "' '" + kClients +
                           "' hold \"$MASTER_ADDR\" \"$MASTER_PORT\" /never";
  Subprocess job({MXRUN_BIN, "--standalone", "--nproc_per_node=2", "--metrics_port=0",
                  "--log_collapse_window=0", "--no_python", "sh", "-c", hold});
  const std::string endpoint = mxrun::testing::AgentMetricsEndpoint(job);
  REQUIRE(job.WaitForStdout("holding", 2, 90s));
  std::string page;
  auto gauge = [&](const std::string& family) {
    const auto samples = mxrun::testing::SamplesByLabel(page, family, "run_id");
    return samples.size() == 1 ? samples.begin()->second : std::string();
  };
  REQUIRE(Eventually([&] {
    page = mxrun::testing::Curl("http://" + endpoint + "/metrics");
    return gauge("mxrun_store_waiting_clients") == "2";
  }));
  INFO(page);
  CHECK(page.find("# TYPE mxrun_store_requests_total counter") != std::string::npos);
  const auto validated = mxrun::testing::SamplesByLabel(page, "mxrun_store_requests_total", "op");
  CHECK(validated.at("VALIDATE") == "2");
  CHECK(validated.at("WAIT") == "2");
  CHECK(validated.at("ADD") == "0");  // world_size not given: no "init/" count
  CHECK(gauge("mxrun_store_clients") == "2");
  CHECK(gauge("mxrun_store_open") == "1");
  kill(job.pid(), SIGTERM);
  CHECK(job.Wait(30s).exit_code == 143);
}
