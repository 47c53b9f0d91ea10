// The workers' store on the agent's metrics page (agent/store/store_metrics): the families and
// their samples from a snapshot, in both formats, after the agent's own families.

#include <string>

#include <catch2/catch.hpp>

#include "agent/store/store_metrics.h"

using mxrun::ExpositionFormat;
using mxrun::StoreTotals;

namespace {

StoreTotals Sample() {
  StoreTotals totals;
  totals.run_id = "job7";
  totals.keys = 12;
  totals.bytes = 4096;
  totals.clients = 3;
  totals.waiting_clients = 2;
  totals.stores = 2;
  totals.requests[static_cast<int>(mxrun::StoreOp::kValidate)] = 3;
  totals.requests[static_cast<int>(mxrun::StoreOp::kSet)] = 40;
  totals.refused_clients = 1;
  return totals;
}

bool Has(const std::string& page, const std::string& line) {
  return page.find(line + "\n") != std::string::npos;
}

}  // namespace

TEST_CASE("the store's metrics: requests by operation, clients, waiters, keys, bytes",
          "[store][metrics]") {
  const std::string page = mxrun::RenderStoreMetrics(Sample(), ExpositionFormat::kPrometheusText);
  INFO(page);
  CHECK(Has(page, "# TYPE mxrun_store_requests_total counter"));
  CHECK(Has(page, "mxrun_store_requests_total{run_id=\"job7\",op=\"VALIDATE\"} 3"));
  CHECK(Has(page, "mxrun_store_requests_total{run_id=\"job7\",op=\"SET\"} 40"));
  CHECK(Has(page, "mxrun_store_requests_total{run_id=\"job7\",op=\"BARRIER\"} 0"));
  CHECK(Has(page, "mxrun_store_refused_clients_total{run_id=\"job7\"} 1"));
  CHECK(Has(page, "mxrun_store_clients{run_id=\"job7\"} 3"));
  CHECK(Has(page, "mxrun_store_waiting_clients{run_id=\"job7\"} 2"));
  CHECK(Has(page, "mxrun_store_keys{run_id=\"job7\"} 12"));
  CHECK(Has(page, "mxrun_store_bytes{run_id=\"job7\"} 4096"));
  CHECK(Has(page, "mxrun_store_open{run_id=\"job7\"} 2"));
}

TEST_CASE(
    "the store's families follow the agent's, before OpenMetrics' one # EOF, and none before a "
    "round",
    "[store][metrics]") {
  auto host = [](ExpositionFormat format) {
    return format == ExpositionFormat::kOpenMetrics ? std::string("agent 1\n# EOF\n")
                                                    : std::string("agent 1\n");
  };
  bool round = false;
  auto renderer = mxrun::StoreMetrics(
      [&round]() -> std::optional<StoreTotals> {
        if (!round) return std::nullopt;
        return Sample();
      },
      host);
  CHECK(renderer(ExpositionFormat::kPrometheusText) == "agent 1\n");
  round = true;
  const std::string open = renderer(ExpositionFormat::kOpenMetrics);
  INFO(open);
  CHECK(open.rfind("agent 1\n", 0) == 0);
  CHECK(open.find("mxrun_store_keys{run_id=\"job7\"} 12\n") != std::string::npos);
  CHECK(open.find("# EOF\n") == open.size() - 6);
  CHECK(open.find("# EOF") == open.rfind("# EOF"));
}
