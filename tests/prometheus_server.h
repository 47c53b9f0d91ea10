#pragma once
// A real Prometheus server for the metrics tests (Debian's `prometheus`, from
// scripts/install-deps.sh): started per test on 127.0.0.1 at a kernel-chosen port, its data in a
// private folder, scraping the given targets every second; stopped (SIGTERM, then SIGKILL) when it
// goes out of scope. Values are read back through Prometheus's own HTTP query API, with curl.

#include <signal.h>

#include <chrono>
#include <fstream>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "tests/free_port.h"
#include "tests/subprocess.h"
#include "tests/temp_dir.h"

namespace mxrun::testing {

class PrometheusServer {
 public:
  // Scraped over HTTPS with a client certificate (mutual TLS).
  struct Tls {
    std::string ca_file, cert_file, key_file;
  };
  // `targets`: "host:port" of each metrics endpoint, one scrape job each ("job" label = name).
  explicit PrometheusServer(const std::vector<std::pair<std::string, std::string>>& targets,
                            std::optional<Tls> tls = std::nullopt) {
    std::set<int> taken;
    port_ = DistinctFreePort(taken);
    std::ofstream config(dir_.path() + "/prometheus.yml");
    config << "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
              "  evaluation_interval: 1s\nscrape_configs:\n";
    for (const auto& [name, target] : targets) {
      config << "  - job_name: " << name << "\n    static_configs:\n      - targets: ['" << target
             << "']\n";
      if (tls) {
        config << "    scheme: https\n    tls_config:\n      ca_file: " << tls->ca_file
               << "\n      cert_file: " << tls->cert_file << "\n      key_file: " << tls->key_file
               << "\n";
      }
    }
    config.close();
    process_ = std::make_unique<Subprocess>(std::vector<std::string>{
        "prometheus", "--config.file=" + dir_.path() + "/prometheus.yml",
        "--storage.tsdb.path=" + dir_.path() + "/data",
        absl::StrCat("--web.listen-address=127.0.0.1:", port_), "--log.level=warn"});
    // Ready once its HTTP API answers (bounded).
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (std::chrono::steady_clock::now() < deadline) {
      if (Curl("/-/ready").find("Ready") != std::string::npos) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    FAIL("prometheus did not become ready within 30 s: " << process_->out());
  }
  ~PrometheusServer() {
    kill(process_->pid(), SIGTERM);
    process_->Wait(std::chrono::seconds(10));  // SIGKILLs it at the deadline
  }

  // The value of every series an instant query returns ("NaN" values skipped), with each series'
  // labels.
  struct Sample {
    std::map<std::string, std::string> labels;
    double value = 0;
  };
  std::vector<Sample> Query(const std::string& promql) {
    const std::string text =
        Run({"curl", "-s", "--max-time", "5", "-G", "--data-urlencode", "query=" + promql,
             absl::StrCat("http://127.0.0.1:", port_, "/api/v1/query")},
            {}, std::chrono::seconds(10))
            .out;
    std::vector<Sample> samples;
    nlohmann::json reply = nlohmann::json::parse(text, nullptr, false);
    if (!reply.is_object() || reply.value("status", "") != "success") return samples;
    for (const auto& series : reply["data"]["result"]) {
      Sample s;
      for (const auto& [k, v] : series["metric"].items()) s.labels[k] = v.get<std::string>();
      s.value = std::stod(series["value"][1].get<std::string>());
      samples.push_back(std::move(s));
    }
    return samples;
  }
  // Waits (bounded) until `promql` returns exactly one series whose value is `value`.
  bool WaitForValue(const std::string& promql, double value,
                    std::chrono::seconds timeout = std::chrono::seconds(30)) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      std::vector<Sample> samples = Query(promql);
      if (samples.size() == 1 && samples[0].value == value) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(250));
    }
    return false;
  }
  // Why a scrape target is not up, as Prometheus says (its /api/v1/targets).
  std::string Targets() { return Curl("/api/v1/targets"); }
  int port() const { return port_; }

 private:
  std::string Curl(const std::string& path) {
    return Run({"curl", "-s", "--max-time", "2", absl::StrCat("http://127.0.0.1:", port_, path)},
               {}, std::chrono::seconds(5))
        .out;
  }

  TempDir dir_;
  int port_ = 0;
  std::unique_ptr<Subprocess> process_;
};

}  // namespace mxrun::testing
