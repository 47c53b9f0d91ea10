#include "agent/hang/flight_records.h"

#include <catch2/catch.hpp>

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include "tests/temp_dir.h"

namespace mxrun {
namespace {

TEST_CASE("a flight-recorder reply is complete once its header's length has come", "[flight]") {
  FlightReply partial = ParseFlightReply("ok 5\n{\"a\"", false, 100);
  CHECK_FALSE(partial.complete);
  FlightReply whole = ParseFlightReply("ok 5\n{\"a\":", false, 100);
  REQUIRE(whole.complete);
  CHECK(whole.ok);
  CHECK(whole.body == "{\"a\":");
  CHECK_FALSE(ParseFlightReply("ok 1", false, 100).complete);  // the header is still coming
}

TEST_CASE("a flight-recorder reply that is wrong says how", "[flight]") {
  FlightReply error = ParseFlightReply("error RuntimeError: no torch\n", false, 100);
  CHECK(error.complete);
  CHECK_FALSE(error.ok);
  CHECK(error.error == "it could not dump: RuntimeError: no torch");
  CHECK(ParseFlightReply("ok 50\nabc", true, 100).error ==
        "its dump was cut short (3 of 50 bytes)");
  CHECK(ParseFlightReply("ok 500\n", false, 100).error ==
        "its dump of 500 bytes is over the limit of 100");
  CHECK(ParseFlightReply("HTTP/1.1 200 OK\n", false, 100).error ==
        "an unexpected reply: HTTP/1.1 200 OK");
  CHECK(ParseFlightReply("ok x\n", false, 100).error == "an unexpected reply: ok x");
  CHECK(ParseFlightReply("", true, 100).error == "it closed the connection without a reply");
  CHECK(ParseFlightReply(std::string(5000, 'a'), false, 100).error ==
        "a reply without a header line");
}

// A worker's server: answers one request with `reply` (from this process, so the peer check
// passes for a target of getpid()).
class OneReplyServer {
 public:
  OneReplyServer(const std::string& path, std::string reply) {
    fd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    std::strncpy(address.sun_path, path.c_str(), sizeof address.sun_path - 1);
    REQUIRE(bind(fd_, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0);
    REQUIRE(listen(fd_, 1) == 0);
    thread_ = std::thread([this, reply = std::move(reply)] {
      const int conn = accept(fd_, nullptr, nullptr);
      if (conn < 0) return;
      char request[64] = {};
      size_t got = 0;
      while (got < 9) {
        const ssize_t n = read(conn, request + got, sizeof request - 1 - got);
        if (n <= 0) break;
        got += static_cast<size_t>(n);
      }
      request_ = std::string(request, got);
      if (send(conn, reply.data(), reply.size(), MSG_NOSIGNAL) < 0) {
      }  // the client may be gone
      close(conn);
    });
  }
  ~OneReplyServer() {
    shutdown(fd_, SHUT_RDWR);
    thread_.join();
    close(fd_);
  }
  const std::string& request() const { return request_; }

 private:
  int fd_ = -1;
  std::thread thread_;
  std::string request_;
};

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST_CASE("every rank's recorder is fetched into the folder, and a rank without one is named",
          "[flight]") {
  testing::TempDir dir;
  const std::string body = R"({"entries": []})";
  FlightDump answered, refused, untrusted, silent;
  {
    OneReplyServer rank0(dir.path() + "/fr-0.sock",
                         "ok " + std::to_string(body.size()) + "\n" + body);
    OneReplyServer rank2(dir.path() + "/fr-2.sock", "ok 10\n{}");  // lies about its length
    std::vector<FlightTarget> targets = {
        {0, getpid(), dir.path() + "/fr-0.sock"},
        {1, getpid(), dir.path() + "/fr-1.sock"},  // nobody serves it
        {2, getpid(), dir.path() + "/fr-2.sock"},
    };
    std::vector<FlightDump> dumps = FetchFlightRecords(targets, dir.path());
    REQUIRE(dumps.size() == 3);
    answered = dumps[0];
    refused = dumps[1];
    silent = dumps[2];
    CHECK(rank0.request() == "fr_trace\n");
  }
  CHECK(answered.error.empty());
  CHECK(answered.file == dir.path() + "/rank0.json");
  CHECK(Slurp(answered.file) == body);
  CHECK(refused.file.empty());
  CHECK(refused.error.find("serves no flight recorder") != std::string::npos);
  CHECK(silent.error == "its dump was cut short (2 of 10 bytes)");

  std::vector<std::string> lines = DescribeFlightDumps({answered, refused, silent});
  REQUIRE(lines.size() == 3);
  CHECK(lines[0] == "dumps of rank 0 (1 of 3 ranks here)");
  CHECK(lines[1].rfind("rank 1: no dump: it serves no flight recorder", 0) == 0);
}

TEST_CASE("a recorder served by a process that is not the worker's is not trusted", "[flight]") {
  testing::TempDir dir;
  OneReplyServer server(dir.path() + "/fr-0.sock", "ok 2\n{}");
  // The target is pid 1 (init): this test process serves the socket and is not its descendant.
  std::vector<FlightDump> dumps =
      FetchFlightRecords({{0, 1, dir.path() + "/fr-0.sock"}}, dir.path());
  REQUIRE(dumps.size() == 1);
  CHECK(dumps[0].file.empty());
  CHECK(dumps[0].error.find("is not this worker's; not trusted") != std::string::npos);
  // The server sees its connection closed unanswered; the destructor's shutdown ends it.
}

TEST_CASE("a rank that does not answer in time is named, the wait bounded", "[flight]") {
  testing::TempDir dir;
  const std::string path = dir.path() + "/fr-0.sock";
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::strncpy(address.sun_path, path.c_str(), sizeof address.sun_path - 1);
  REQUIRE(bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0);
  REQUIRE(listen(fd, 1) == 0);  // listens, never accepts: a worker whose thread cannot run
  FlightFetchOptions options;
  options.budget = std::chrono::milliseconds(50);
  std::vector<FlightDump> dumps = FetchFlightRecords({{0, getpid(), path}}, dir.path(), options);
  close(fd);
  REQUIRE(dumps.size() == 1);
  CHECK(dumps[0].error ==
        "it did not answer within 0.05 s (a worker holding Python's GIL, or stopped)");
}

TEST_CASE("a verdict that cannot run says why", "[flight]") {
  testing::TempDir dir;
  // The project's Python without the checkout's module on its path.
  std::vector<std::string> lines =
      FlightVerdict(PYTHON_BIN, {"PATH=/usr/bin:/bin"}, dir.path(), 2, std::chrono::seconds(20));
  REQUIRE(lines.size() == 1);
  CHECK(lines[0].rfind(
            std::string("no verdict: ") + PYTHON_BIN + " -m mxrun._flight_verdict failed: ", 0) ==
        0);
  CHECK(lines[0].find("No module named") != std::string::npos);
}

TEST_CASE("no verdict is made without a Python to run it", "[flight]") {
  CHECK(FlightVerdict("", {}, "/nowhere", 2, std::chrono::seconds(1)) ==
        std::vector<std::string>{
            "no verdict: no Python is known to run the analyzer with (--no_python)"});
}

}  // namespace
}  // namespace mxrun

// The launcher's part: the recorder on unless the user chose, a socket folder in the scratch.
#include "launcher/flight_recorder_setup.h"

namespace mxrun {
namespace {

struct Setup {
  WorkerSpec worker;
  FlightRecorderConfig flight;
};

Setup SetUp(EnvMap env, const std::string& scratch,
            EntrypointKind kind = EntrypointKind::kPythonScript) {
  LaunchOptions options;
  options.entrypoint_kind = kind;
  WorkerCommand command;
  command.executable = "/usr/bin/python3";
  Setup s;
  s.worker.base_env = std::move(env);
  SetUpFlightRecorder(options, command, scratch, 8, s.worker, s.flight);
  return s;
}

TEST_CASE("the flight recorder is turned on for Python workers unless the user chose", "[flight]") {
  testing::TempDir scratch;
  Setup on = SetUp({}, scratch.path());
  CHECK(on.worker.base_env.at("TORCH_FR_BUFFER_SIZE") == "2000");
  CHECK(on.worker.flight_socket_dir == scratch.path() + "/fr");
  CHECK(on.flight.on);
  CHECK(on.flight.python == "/usr/bin/python3");

  Setup theirs = SetUp({{"TORCH_FR_BUFFER_SIZE", "500"}}, scratch.path());
  CHECK(theirs.worker.base_env.at("TORCH_FR_BUFFER_SIZE") == "500");
  CHECK(theirs.flight.on);

  Setup off = SetUp({{"TORCH_NCCL_TRACE_BUFFER_SIZE", "0"}}, scratch.path());
  CHECK(off.worker.base_env.count("TORCH_FR_BUFFER_SIZE") == 0);
  CHECK(off.worker.flight_socket_dir.empty());
  CHECK_FALSE(off.flight.on);

  Setup trainer = SetUp({}, scratch.path(), EntrypointKind::kBundledTrainer);
  CHECK(trainer.worker.base_env.count("TORCH_FR_BUFFER_SIZE") == 0);
  CHECK_FALSE(trainer.flight.on);
}

TEST_CASE("a scratch path too long for a Unix socket leaves the recorder on but asks nothing",
          "[flight]") {
  Setup s = SetUp({}, "/tmp/" + std::string(120, 'x'));
  CHECK(s.worker.base_env.at("TORCH_FR_BUFFER_SIZE") == "2000");
  CHECK(s.worker.flight_socket_dir.empty());
  CHECK_FALSE(s.flight.on);
}

}  // namespace
}  // namespace mxrun

#include "agent/hang/collective_failure.h"

namespace mxrun {
namespace {

TEST_CASE("a collective's failure is told by PyTorch's words, a peer's death is not one",
          "[flight]") {
  WorkerFailure gloo;
  gloo.last_lines = {
      "[rank0]:     work.wait()",
      "[rank0]: RuntimeError: [../gloo/transport/tcp/unbound_buffer.cc:78] Timed out "
      "waiting 3000ms for recv operation to complete"};
  CHECK(CollectiveFailureSign(gloo) == "Timed out waiting");
  WorkerFailure nccl;
  nccl.message =
      "[Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=7, "
      "OpType=ALLREDUCE) ran for 600000 milliseconds before timing out.";
  CHECK(CollectiveFailureSign(nccl) == "Watchdog caught collective operation timeout");
  WorkerFailure backend;
  backend.traceback = "torch.distributed.DistBackendError: NCCL error in: ...";
  CHECK(CollectiveFailureSign(backend) == "NCCL error");
  WorkerFailure peer_gone;
  peer_gone.last_lines = {
      "RuntimeError: [../gloo/transport/tcp/pair.cc:553] Connection closed "
      "by peer [127.0.0.1]:56027"};
  CHECK(CollectiveFailureSign(peer_gone).empty());
  WorkerFailure plain;
  plain.message = "ValueError: bad batch";
  CHECK(CollectiveFailureSign(plain).empty());
}

}  // namespace
}  // namespace mxrun
