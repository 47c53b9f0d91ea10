#pragma once
// Writes metrics in Prometheus's text exposition format (0.0.4) or in OpenMetrics 1.0, the two
// formats a Prometheus server scrapes. Pure: no I/O, no clock. The agent and the master build
// their pages with it (agent/metrics/agent_metrics, rendezvous/master_server/master_metrics).
//
// Names follow Prometheus's conventions and are the same in both formats: counters end in
// `_total` (OpenMetrics names the family without it), units are base units in the name
// (`_seconds`, `_bytes`). Label values are escaped as the formats require.

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace mxrun {

enum class ExpositionFormat { kPrometheusText, kOpenMetrics };
enum class MetricType { kCounter, kGauge, kHistogram };

using MetricLabels = std::vector<std::pair<std::string, std::string>>;

// The format a scraper asked for in its Accept header: OpenMetrics when it lists
// application/openmetrics-text with a quality at least that of text/plain (what Prometheus
// sends by default), else the text format.
ExpositionFormat NegotiateExposition(std::string_view accept_header);
// The Content-Type header value of a page in `format`.
const char* ExpositionContentType(ExpositionFormat format);

// Cumulative buckets, as Prometheus histograms have them. `bounds` ascending, without +Inf.
class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);
  void Observe(double value);
  const std::vector<double>& bounds() const { return bounds_; }
  const std::vector<uint64_t>& counts() const { return counts_; }  // per bucket, +Inf last
  uint64_t count() const { return count_; }
  double sum() const { return sum_; }

 private:
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;
  uint64_t count_ = 0;
  double sum_ = 0;
};

class MetricsWriter {
 public:
  explicit MetricsWriter(ExpositionFormat format) : format_(format) {}

  // Starts a family (its HELP and TYPE lines). `name` is the sample name: a counter's ends in
  // "_total". A family with no samples is still written (a scraper then knows the metric).
  void Family(std::string_view name, MetricType type, std::string_view help);
  // A sample of the current counter or gauge family.
  void Sample(const MetricLabels& labels, double value);
  // The samples of one histogram of the current histogram family.
  void HistogramSamples(const MetricLabels& labels, const Histogram& histogram);
  // The page; OpenMetrics ends it with "# EOF".
  std::string Finish();

 private:
  void Line(std::string_view suffix, const MetricLabels& labels, double value,
            const std::pair<std::string, std::string>* extra = nullptr);

  ExpositionFormat format_;
  std::string family_;  // the current family's sample name
  MetricType type_ = MetricType::kGauge;
  std::string out_;
};

// A number as both formats write it: shortest round-trip form, +Inf, -Inf, NaN.
std::string FormatMetricValue(double value);
// A label value or HELP text escaped (backslash, double quote in label values, newline).
std::string EscapeLabelValue(std::string_view value);

}  // namespace mxrun
