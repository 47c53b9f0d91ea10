#include "agent/store/store_metrics.h"

#include <utility>

namespace mxrun {

std::string RenderStoreMetrics(const StoreTotals& totals, ExpositionFormat format) {
  MetricsWriter w(format);
  const MetricLabels job{{"run_id", totals.run_id}};
  w.Family("mxrun_store_requests_total", MetricType::kCounter,
           "Requests the workers' store (the agent's TCPStore) served, by operation (c10d's "
           "names), over every round.");
  for (std::uint8_t op = 0; op < kStoreOpCount; ++op) {
    MetricLabels labels = job;
    labels.emplace_back("op", StoreOpName(static_cast<StoreOp>(op)));
    w.Sample(labels, static_cast<double>(totals.requests[op]));
  }
  w.Family("mxrun_store_refused_clients_total", MetricType::kCounter,
           "Connections the workers' store closed because they broke the protocol or a bound.");
  w.Sample(job, static_cast<double>(totals.refused_clients));
  w.Family("mxrun_store_clients", MetricType::kGauge,
           "Connections to the workers' stores open now (this round's and earlier ones' kept).");
  w.Sample(job, static_cast<double>(totals.clients));
  w.Family("mxrun_store_waiting_clients", MetricType::kGauge,
           "Clients waiting on a key (WAIT, BARRIER, a GET's wait) now.");
  w.Sample(job, static_cast<double>(totals.waiting_clients));
  w.Family("mxrun_store_keys", MetricType::kGauge, "Keys in the round's store.");
  w.Sample(job, static_cast<double>(totals.keys));
  w.Family("mxrun_store_bytes", MetricType::kGauge,
           "Bytes the round's store holds (keys, values, queued items, each with a fixed "
           "overhead), as counted against its bound.");
  w.Sample(job, static_cast<double>(totals.bytes));
  w.Family("mxrun_store_open", MetricType::kGauge,
           "Workers' stores open: this round's and earlier rounds' still used by clients.");
  w.Sample(job, static_cast<double>(totals.stores));
  return w.Finish();
}

MetricsRenderer StoreMetrics(std::function<std::optional<StoreTotals>()> totals,
                             MetricsRenderer host) {
  return [totals = std::move(totals), host = std::move(host)](ExpositionFormat format) {
    std::string page = host(format);
    const std::optional<StoreTotals> now = totals();
    if (!now) return page;
    if (format == ExpositionFormat::kOpenMetrics && page.size() >= 6) {
      page.resize(page.size() - 6);  // "# EOF\n": the store's families come before it
    }
    return page + RenderStoreMetrics(*now, format);
  };
}

}  // namespace mxrun
