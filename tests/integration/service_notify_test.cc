// mxrun as a systemd Type=notify service: the notification datagrams it sends, read from a real
// NOTIFY_SOCKET opened by the test (a unix datagram socket in a temporary folder).

#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>

#include <sstream>

#include "nlohmann/json.hpp"
#include "tests/subprocess.h"

using namespace std::chrono_literals;
using mxrun::testing::MxrunWithChild;
using mxrun::testing::ProcessResult;
using mxrun::testing::Run;
using mxrun::testing::TempDir;

namespace {

class NotifySocket {
 public:
  explicit NotifySocket(const std::string& path) : path_(path) {
    fd_ = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
    REQUIRE(::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
  }
  ~NotifySocket() { ::close(fd_); }
  // Every datagram received so far, in order.
  std::vector<std::string> Drain() {
    std::vector<std::string> messages;
    char buffer[4096];
    for (;;) {
      const ssize_t n = ::recv(fd_, buffer, sizeof(buffer), 0);
      if (n < 0) break;
      messages.emplace_back(buffer, n);
    }
    return messages;
  }

 private:
  std::string path_;
  int fd_ = -1;
};

int IndexOf(const std::vector<std::string>& messages, const std::string& needle) {
  for (size_t i = 0; i < messages.size(); ++i) {
    if (messages[i].find(needle) != std::string::npos) return static_cast<int>(i);
  }
  return -1;
}

std::string Joined(const std::vector<std::string>& messages) {
  std::string all;
  for (const auto& m : messages) all += "[" + m + "]\n";
  return all;
}

}  // namespace

TEST_CASE("mxrun tells systemd READY, its status, watchdog beats and STOPPING", "[systemd]") {
  TempDir dir;
  NotifySocket socket(dir.path() + "/notify");
  // The socket is read only after mxrun exits, so the messages must fit in its queue
  // (net.unix.max_dgram_qlen, 10 on some hosts) or mxrun's blocking send waits for ever.
  ProcessResult r =
      Run(MxrunWithChild({"--standalone", "--nproc_per_node=2"}, {"--sleep=0.8"}),
          {{"NOTIFY_SOCKET", dir.path() + "/notify"}, {"WATCHDOG_USEC", "400000"}}, 60s);
  REQUIRE(r.exit_code == 0);
  std::vector<std::string> messages = socket.Drain();
  INFO(Joined(messages));
  const int ready = IndexOf(messages, "READY=1");
  REQUIRE(ready == 0);
  CHECK(messages[ready].find("STATUS=round 0: node 0 of 1, ranks 0-1 of 2") != std::string::npos);
  const int watchdog = IndexOf(messages, "WATCHDOG=1");
  CHECK(watchdog > ready);  // every 200 ms while the workers sleep 0.8 s
  const int stopping = IndexOf(messages, "STOPPING=1");
  REQUIRE(stopping == static_cast<int>(messages.size()) - 1);
  CHECK(messages[stopping].find("STATUS=job succeeded") != std::string::npos);
}

TEST_CASE("a restart is announced as a status line", "[systemd]") {
  TempDir dir;
  NotifySocket socket(dir.path() + "/notify");
  ProcessResult r = Run(MxrunWithChild({"--standalone", "--nproc_per_node=1", "--max_restarts=1"},
                                       {"--exit=3", "--fail-below-attempt=1"}),
                        {{"NOTIFY_SOCKET", dir.path() + "/notify"}}, 60s);
  REQUIRE(r.exit_code == 0);
  std::vector<std::string> messages = socket.Drain();
  INFO(Joined(messages));
  CHECK(IndexOf(messages, "READY=1") == 0);
  const int restart = IndexOf(messages, "STATUS=restarting the worker group (1 of 1 restarts)");
  REQUIRE(restart > 0);
  CHECK(IndexOf(messages, "STATUS=round 1:") > restart);
  CHECK(IndexOf(messages, "WATCHDOG=1") == -1);  // no WatchdogSec, no beats
}

TEST_CASE("SIGTERM from systemctl stop sends STOPPING before the workers' grace period",
          "[systemd]") {
  TempDir dir;
  NotifySocket socket(dir.path() + "/notify");
  mxrun::testing::Subprocess job(
      MxrunWithChild({"--standalone", "--nproc_per_node=1"}, {"--ready", "--sleep=60"}),
      {{"NOTIFY_SOCKET", dir.path() + "/notify"}});
  REQUIRE(job.WaitForStdout("ready", 1, 30s));
  ::kill(job.pid(), SIGTERM);
  ProcessResult r = job.Wait(60s);
  CHECK(r.exit_code == 128 + SIGTERM);
  std::vector<std::string> messages = socket.Drain();
  INFO(Joined(messages));
  const int stopping = IndexOf(messages, "STOPPING=1");
  REQUIRE(stopping > 0);
  CHECK(messages[stopping].find("SIGTERM") != std::string::npos);
}

TEST_CASE("the json log format makes every console line a JSON object", "[systemd][json]") {
  ProcessResult r = Run(MxrunWithChild({"--standalone", "--nproc_per_node=2", "--log_format=json"},
                                       {"--lines=2", "--exit=3", "--only-rank=1"}),
                        {}, 60s);
  CHECK(r.exit_code == 1);
  int worker_lines = 0, mxrun_records = 0;
  bool summary_seen = false;
  for (const std::string* stream : {&r.out, &r.err}) {
    std::istringstream in(*stream);
    for (std::string line; std::getline(in, line);) {
      INFO(line);
      nlohmann::json record = nlohmann::json::parse(line);  // throws (fails) on a non-JSON line
      if (record.contains("line")) {
        ++worker_lines;
        CHECK(record["node"] == 0);
        CHECK((record["stream"] == "stdout" || record["stream"] == "stderr"));
      } else {
        ++mxrun_records;
        CHECK(record["source"] == "mxrun");
        if (record["message"].get<std::string>().find("Root cause") != std::string::npos) {
          summary_seen = true;
        }
      }
    }
  }
  // The failing rank's two lines and its exit message at least; rank 0 may be stopped before it
  // prints (it races rank 1's failure; a loaded machine showed 3).
  CHECK(worker_lines >= 3);
  CHECK(mxrun_records >= 2);
  CHECK(summary_seen);
}
