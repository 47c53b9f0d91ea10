#include <catch2/catch.hpp>

#include <unistd.h>

#include <csignal>
#include <fstream>

#include "agent/workers/failure_report.h"
#include "common/signal_names.h"
#include "nlohmann/json.hpp"

using mxrun::WorkerFailure;

namespace {

std::string WriteTemp(const std::string& content) {
  char path[] = "/tmp/mxrun-errfile-XXXXXX";
  int fd = mkstemp(path);
  REQUIRE(fd >= 0);
  REQUIRE(write(fd, content.data(), content.size()) == static_cast<ssize_t>(content.size()));
  close(fd);
  return path;
}

WorkerFailure SampleFailure() {
  WorkerFailure f;
  f.host = "node7";
  f.node_rank = 1;
  f.global_rank = 5;
  f.local_rank = 1;
  f.pid = 4242;
  f.attempt = 2;
  f.term_signal = 9;
  f.last_lines = {"epoch 3", "loss 0.1"};
  return f;
}

}  // namespace

TEST_CASE("signal names", "[signals]") {
  CHECK(mxrun::DescribeSignal(9) == "Signal 9 (SIGKILL)");
  CHECK(mxrun::ParseSignal("SIGTERM") == SIGTERM);
  CHECK(mxrun::ParseSignal("term") == SIGTERM);
  CHECK(mxrun::ParseSignal("15") == 15);
  CHECK_FALSE(mxrun::ParseSignal("SIGNOPE").has_value());
  CHECK(mxrun::SignalName(SIGRTMIN + 1).rfind("SIG", 0) == 0);
}

TEST_CASE("PyTorch's @record error file is read", "[failure]") {
  std::string path = WriteTemp(
      R"({"message": {"message": "RuntimeError: CUDA out of memory", "extraInfo": )"
      R"({"py_callstack": "Traceback (most recent call last):\n  File x.py", "timestamp": "1"}}})");
  auto contents = mxrun::ReadErrorFile(path);
  REQUIRE(contents.has_value());
  CHECK(contents->message == "RuntimeError: CUDA out of memory");
  CHECK_THAT(contents->traceback, Catch::StartsWith("Traceback"));
  unlink(path.c_str());

  std::string plain = WriteTemp(R"({"message": "plain string"})");
  CHECK(mxrun::ReadErrorFile(plain)->message == "plain string");
  unlink(plain.c_str());

  std::string garbage = WriteTemp("not json at all");
  CHECK_THAT(mxrun::ReadErrorFile(garbage)->message, Catch::Contains("not json at all"));
  unlink(garbage.c_str());

  CHECK_FALSE(mxrun::ReadErrorFile("/nonexistent/error.json").has_value());
}

TEST_CASE("the summary names the first failure completely", "[failure]") {
  WorkerFailure f = SampleFailure();
  f.message = "boom";
  std::string text = mxrun::FormatFailureSummary(f, {"train.py", 2, 2});
  CHECK_THAT(text, Catch::Contains("train.py FAILED"));
  CHECK_THAT(text, Catch::Contains("restarts spent: 2 of 2"));
  CHECK_THAT(text, Catch::Contains("host       : node7"));
  CHECK_THAT(text, Catch::Contains("node rank  : 1"));
  CHECK_THAT(text, Catch::Contains("rank       : 5 (local_rank: 1)"));
  CHECK_THAT(text, Catch::Contains("pid        : 4242"));
  CHECK_THAT(text, Catch::Contains("Signal 9 (SIGKILL)"));
  CHECK_THAT(text, Catch::Contains("boom"));
  CHECK_THAT(text, Catch::Contains("loss 0.1"));
  f.term_signal = 0;
  f.exit_code = 3;
  CHECK_THAT(mxrun::FormatFailureSummary(f, {"x", 0, 0}), Catch::Contains("exit code 3"));
}

TEST_CASE("a hung worker's summary gives the rule, the numbers and the diagnostics", "[failure]") {
  WorkerFailure f = SampleFailure();
  f.term_signal = 0;
  f.hang.rule = "heartbeat";
  f.hang.detail = "no heartbeat for 12.0 s (--hang_timeout=10.0 s)";
  f.hang.diagnostics_dir = "/logs/attempt_2/hang-Ab12cd";
  f.hang.diagnostics = {"rank 5 (pid 4242): T (stopped: SIGSTOP, SIGTSTP or a debugger)",
                        "  stack (gdb): raise < main"};
  std::string text = mxrun::FormatFailureSummary(f, {"train", 2, 2});
  CHECK_THAT(
      text,
      Catch::Contains(
          "exit       : hung (heartbeat): no heartbeat for 12.0 s (--hang_timeout=10.0 s)\n"));
  CHECK_THAT(text, Catch::Contains("diagnostics: /logs/attempt_2/hang-Ab12cd (on that host)"));
  CHECK_THAT(text, Catch::Contains("hang state :\n      rank 5 (pid 4242): T (stopped"));
  CHECK_THAT(text, Catch::Contains("        stack (gdb): raise < main"));
  CHECK_THAT(text, !Catch::Contains("Signal 9"));

  std::string path = WriteTemp("");
  REQUIRE(mxrun::WriteAgentErrorFile(path, f));
  nlohmann::json doc = nlohmann::json::parse(std::ifstream(path));
  CHECK(doc["mxrun"]["hang"]["rule"] == "heartbeat");
  CHECK(doc["mxrun"]["hang"]["diagnostics_dir"] == "/logs/attempt_2/hang-Ab12cd");
  CHECK_THAT(doc["message"]["message"].get<std::string>(), Catch::Contains("hung (heartbeat)"));
  unlink(path.c_str());
}

TEST_CASE("the agent's error file keeps the worker's and names the worker", "[failure]") {
  WorkerFailure f = SampleFailure();
  std::string out = WriteTemp("");
  f.error_file_contents = R"({"message": {"message": "from worker", "extraInfo": {}}})";
  REQUIRE(mxrun::WriteAgentErrorFile(out, f));
  auto doc = nlohmann::json::parse(std::ifstream(out));
  CHECK(doc["message"]["message"] == "from worker");
  CHECK(doc["mxrun"]["rank"] == 5);
  CHECK(doc["mxrun"]["exitcode"] == -9);
  CHECK(doc["mxrun"]["signal"] == "SIGKILL");

  f.error_file_contents.clear();
  REQUIRE(mxrun::WriteAgentErrorFile(out, f));
  auto built = nlohmann::json::parse(std::ifstream(out));
  CHECK_THAT(built["message"]["message"].get<std::string>(), Catch::Contains("Signal 9 (SIGKILL)"));
  unlink(out.c_str());
}
