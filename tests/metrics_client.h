#pragma once
// Reading metrics endpoints in integration tests: an agent's endpoint from its log line, and a
// page fetched with curl (a real HTTP client, with the Accept header Prometheus sends).

#include <sys/types.h>

#include <chrono>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "tests/subprocess.h"

namespace mxrun::testing {

// "host:port" of an agent's metrics endpoint, from its log line.
inline std::string AgentMetricsEndpoint(Subprocess& agent) {
  REQUIRE(
      agent.WaitForStderr("serving Prometheus metrics at http://", 1, std::chrono::seconds(30)));
  const std::string& err = agent.err();
  const size_t at = err.find("serving Prometheus metrics at http://") + 37;
  return err.substr(at, err.find("/metrics", at) - at);
}

inline std::string Curl(const std::string& url, const std::string& accept = "") {
  std::vector<std::string> argv{"curl", "-s", "--max-time", "5"};
  if (!accept.empty()) argv.insert(argv.end(), {"-H", "Accept: " + accept});
  argv.push_back(url);
  return Run(argv, {}, std::chrono::seconds(10)).out;
}

// A "KEY: N kB" field of /proc/PID/status (VmRSS, VmHWM) in KiB; -1 when the process is gone.
inline long ProcStatusKiB(pid_t pid, const std::string& key) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind(key + ":", 0) == 0) return std::stol(line.substr(key.size() + 1));
  }
  return -1;
}

// The endpoint's page once it holds `count` samples of `family` (polled every 100 ms, at most
// 4 s), or the last page fetched.
inline std::string PageWithSamples(const std::string& endpoint, const std::string& family,
                                   int count) {
  std::string page;
  for (int i = 0; i < 40 && CountOccurrences(page, family + "{") < count; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    page = Curl("http://" + endpoint + "/metrics");
  }
  return page;
}

// The value of each sample of `family` on a text-format page, by the value of its `label`.
inline std::map<std::string, std::string> SamplesByLabel(const std::string& page,
                                                         const std::string& family,
                                                         const std::string& label) {
  std::map<std::string, std::string> out;
  size_t at = 0;
  while ((at = page.find(family + "{", at)) != std::string::npos) {
    if (at > 0 && page[at - 1] != '\n') {  // part of a longer name or a comment
      at += family.size();
      continue;
    }
    const size_t end = page.find('\n', at);
    const std::string line = page.substr(at, end - at);
    const size_t l = line.find(label + "=\"");
    if (l != std::string::npos) {
      const size_t v = l + label.size() + 2;
      out[line.substr(v, line.find('"', v) - v)] = line.substr(line.rfind(' ') + 1);
    }
    at = end == std::string::npos ? page.size() : end;
  }
  return out;
}

}  // namespace mxrun::testing
