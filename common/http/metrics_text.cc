#include "common/http/metrics_text.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>

#include "absl/strings/ascii.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace mxrun {
namespace {

// The quality an Accept header gives media type `type` (0 when not listed); with
// `wildcard_counts`, "*/*" counts for it too.
double Quality(absl::string_view accept, absl::string_view type, bool wildcard_counts) {
  double best = 0, wildcard = 0;
  for (absl::string_view item : absl::StrSplit(accept, ',')) {
    std::vector<absl::string_view> parts = absl::StrSplit(item, ';');
    const std::string media = absl::AsciiStrToLower(absl::StripAsciiWhitespace(parts[0]));
    double q = 1;
    for (size_t i = 1; i < parts.size(); ++i) {
      absl::string_view param = absl::StripAsciiWhitespace(parts[i]);
      if (absl::ConsumePrefix(&param, "q=")) q = std::strtod(std::string(param).c_str(), nullptr);
    }
    if (media == type) best = std::max(best, q);
    if (media == "*/*") wildcard = std::max(wildcard, q);
  }
  return best > 0 || !wildcard_counts ? best : wildcard;
}

std::string EscapeHelp(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace

ExpositionFormat NegotiateExposition(std::string_view accept_header) {
  const absl::string_view accept(accept_header.data(), accept_header.size());
  // OpenMetrics only when named: a client that takes anything gets the classic format.
  const double open = Quality(accept, "application/openmetrics-text", false);
  const double text = Quality(accept, "text/plain", true);
  return open > 0 && open >= text ? ExpositionFormat::kOpenMetrics
                                  : ExpositionFormat::kPrometheusText;
}

const char* ExpositionContentType(ExpositionFormat format) {
  return format == ExpositionFormat::kOpenMetrics
             ? "application/openmetrics-text; version=1.0.0; charset=utf-8"
             : "text/plain; version=0.0.4; charset=utf-8";
}

Histogram::Histogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::Observe(double value) {
  const size_t bucket = std::lower_bound(bounds_.begin(), bounds_.end(), value) - bounds_.begin();
  ++counts_[bucket];
  ++count_;
  sum_ += value;
}

std::string FormatMetricValue(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  char buffer[64];
  const auto result = std::to_chars(buffer, buffer + sizeof buffer, value);
  return std::string(buffer, result.ptr);
}

std::string EscapeLabelValue(std::string_view value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    switch (c) {
      case '\\':
        out += "\\\\";
        break;
      case '"':
        out += "\\\"";
        break;
      case '\n':
        out += "\\n";
        break;
      default:
        out += c;
    }
  }
  return out;
}

void MetricsWriter::Family(std::string_view name, MetricType type, std::string_view help) {
  family_ = std::string(name);
  type_ = type;
  absl::string_view suffixed(name.data(), name.size());
  if (format_ == ExpositionFormat::kOpenMetrics && type == MetricType::kCounter) {
    absl::ConsumeSuffix(&suffixed, "_total");  // OpenMetrics: the family is named without it
  }
  const std::string family(suffixed);
  const char* type_name = type == MetricType::kCounter ? "counter"
                          : type == MetricType::kGauge ? "gauge"
                                                       : "histogram";
  out_.append("# HELP ").append(family).append(" ").append(EscapeHelp(help)).append("\n");
  out_.append("# TYPE ").append(family).append(" ").append(type_name).append("\n");
}

void MetricsWriter::Line(std::string_view suffix, const MetricLabels& labels, double value,
                         const std::pair<std::string, std::string>* extra) {
  out_.append(family_).append(suffix);
  if (!labels.empty() || extra != nullptr) {
    out_ += '{';
    bool first = true;
    auto add = [&](const std::pair<std::string, std::string>& label) {
      if (!first) out_ += ',';
      first = false;
      out_.append(label.first).append("=\"").append(EscapeLabelValue(label.second)).append("\"");
    };
    for (const auto& label : labels) add(label);
    if (extra != nullptr) add(*extra);
    out_ += '}';
  }
  out_.append(" ").append(FormatMetricValue(value)).append("\n");
}

void MetricsWriter::Sample(const MetricLabels& labels, double value) { Line("", labels, value); }

void MetricsWriter::HistogramSamples(const MetricLabels& labels, const Histogram& histogram) {
  uint64_t cumulative = 0;
  for (size_t i = 0; i < histogram.counts().size(); ++i) {
    cumulative += histogram.counts()[i];
    const std::pair<std::string, std::string> le{
        "le", i < histogram.bounds().size() ? FormatMetricValue(histogram.bounds()[i]) : "+Inf"};
    Line("_bucket", labels, static_cast<double>(cumulative), &le);
  }
  Line("_sum", labels, histogram.sum());
  Line("_count", labels, static_cast<double>(histogram.count()));
}

std::string MetricsWriter::Finish() {
  if (format_ == ExpositionFormat::kOpenMetrics) out_ += "# EOF\n";
  return std::move(out_);
}

}  // namespace mxrun
