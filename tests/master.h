#pragma once
// A standalone rendezvous master (mxrun-master, from the MXRUN_MASTER_BIN compile definition) on
// 127.0.0.1 for integration tests, stopped with SIGTERM when it goes out of scope.

#include <signal.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "tests/subprocess.h"

namespace mxrun::testing {

struct MasterOptions {
  std::vector<std::string> extra{};  // more flags
  int port = 0;                      // 0: chosen by the kernel
  std::string state_dir{};           // --state_dir when not empty
};

// The address a server printed after "listening on " (mxrun-master, the tests' TCP proxy).
inline std::string ListeningOn(const std::string& out) {
  const size_t at = out.find("listening on ") + 13;
  return out.substr(at, out.find_first_of(" \n", at) - at);
}

// A standalone master on 127.0.0.1, stopped with SIGTERM when it goes out of scope.
class Master {
 public:
  explicit Master(MasterOptions options = {}) {
    std::vector<std::string> argv{MXRUN_MASTER_BIN, "--port=" + std::to_string(options.port)};
    if (!options.state_dir.empty()) argv.push_back("--state_dir=" + options.state_dir);
    argv.insert(argv.end(), options.extra.begin(), options.extra.end());
    process_ = std::make_unique<Subprocess>(argv);
    REQUIRE(process_->WaitForStdout("listening on", 1, std::chrono::seconds(10)));
    endpoint_ = ListeningOn(process_->out());
  }
  ~Master() {
    if (killed_) return;  // reaped: its pid may belong to another process by now
    kill(process_->pid(), SIGTERM);
    process_->Wait(std::chrono::seconds(10));
  }
  // Dies without warning (SIGKILL), as a crashed master does.
  void Kill() {
    REQUIRE(kill(process_->pid(), SIGKILL) == 0);
    process_->Wait(std::chrono::seconds(10));
    killed_ = true;
  }
  // Stops it (SIGTERM) and returns everything it printed.
  std::string StopAndOutput() {
    kill(process_->pid(), SIGTERM);
    ProcessResult result = process_->Wait(std::chrono::seconds(10));
    killed_ = true;
    return result.out + result.err;
  }
  const std::string& endpoint() const { return endpoint_; }
  // "host:port" of its metrics endpoint (it prints "mxrun-master metrics at
  // http[s]://HOST:PORT/...").
  std::string MetricsEndpoint() {
    REQUIRE(process_->WaitForStdout("metrics at ", 1, std::chrono::seconds(10)));
    const std::string& out = process_->out();
    const size_t at = out.find("://", out.find("metrics at ")) + 3;  // http:// or https://
    return out.substr(at, out.find("/metrics", at) - at);
  }
  pid_t pid() const { return process_->pid(); }
  // What it printed so far, and waiting for a line on its stderr (its decisions' log).
  Subprocess& process() { return *process_; }

 private:
  std::unique_ptr<Subprocess> process_;
  std::string endpoint_;
  bool killed_ = false;
};

}  // namespace mxrun::testing
