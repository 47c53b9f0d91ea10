#include <catch2/catch.hpp>

#include "common/http/http_server.h"
#include "common/http/metrics_text.h"

using mxrun::ExpositionFormat;
using mxrun::MetricType;

TEST_CASE("the text format: HELP and TYPE, labels escaped, counters keep _total", "[metrics]") {
  mxrun::MetricsWriter w(ExpositionFormat::kPrometheusText);
  w.Family("mxrun_restarts_total", MetricType::kCounter, "Restarts.\nSpent \\ so far.");
  w.Sample({{"run_id", "a\"b\\c\nd"}}, 3);
  w.Family("mxrun_world_size", MetricType::kGauge, "World size.");
  w.Sample({}, 4);
  w.Sample({{"run_id", "x"}, {"node", "0"}}, 0.25);
  CHECK(w.Finish() ==
        "# HELP mxrun_restarts_total Restarts.\\nSpent \\\\ so far.\n"
        "# TYPE mxrun_restarts_total counter\n"
        "mxrun_restarts_total{run_id=\"a\\\"b\\\\c\\nd\"} 3\n"
        "# HELP mxrun_world_size World size.\n"
        "# TYPE mxrun_world_size gauge\n"
        "mxrun_world_size 4\n"
        "mxrun_world_size{run_id=\"x\",node=\"0\"} 0.25\n");
}

TEST_CASE("OpenMetrics: counter families drop _total, samples keep it, the page ends with EOF",
          "[metrics]") {
  mxrun::MetricsWriter w(ExpositionFormat::kOpenMetrics);
  w.Family("mxrun_failures_total", MetricType::kCounter, "Failures.");
  w.Sample({{"cause", "exit"}}, 1);
  CHECK(w.Finish() ==
        "# HELP mxrun_failures Failures.\n"
        "# TYPE mxrun_failures counter\n"
        "mxrun_failures_total{cause=\"exit\"} 1\n"
        "# EOF\n");
}

TEST_CASE("histograms: cumulative buckets up to +Inf, sum and count", "[metrics]") {
  mxrun::Histogram h({0.1, 1, 10});
  h.Observe(0.05);
  h.Observe(0.1);  // le is inclusive
  h.Observe(5);
  h.Observe(50);
  mxrun::MetricsWriter w(ExpositionFormat::kPrometheusText);
  w.Family("mxrun_recovery_seconds", MetricType::kHistogram, "Recovery.");
  w.HistogramSamples({{"run_id", "r"}}, h);
  CHECK(w.Finish() ==
        "# HELP mxrun_recovery_seconds Recovery.\n"
        "# TYPE mxrun_recovery_seconds histogram\n"
        "mxrun_recovery_seconds_bucket{run_id=\"r\",le=\"0.1\"} 2\n"
        "mxrun_recovery_seconds_bucket{run_id=\"r\",le=\"1\"} 2\n"
        "mxrun_recovery_seconds_bucket{run_id=\"r\",le=\"10\"} 3\n"
        "mxrun_recovery_seconds_bucket{run_id=\"r\",le=\"+Inf\"} 4\n"
        "mxrun_recovery_seconds_sum{run_id=\"r\"} 55.15\n"
        "mxrun_recovery_seconds_count{run_id=\"r\"} 4\n");
}

TEST_CASE("metric values: shortest form, infinities and NaN as the formats spell them",
          "[metrics]") {
  CHECK(mxrun::FormatMetricValue(1e-9) == "1e-09");
  CHECK(mxrun::FormatMetricValue(123456789012.0) == "123456789012");
  CHECK(mxrun::FormatMetricValue(1.0 / 0.0) == "+Inf");
  CHECK(mxrun::FormatMetricValue(-1.0 / 0.0) == "-Inf");
  CHECK(mxrun::FormatMetricValue(0.0 / 0.0) == "NaN");
}

TEST_CASE("content negotiation: OpenMetrics only when the scraper prefers it", "[metrics]") {
  // What Prometheus 2.x sends by default.
  CHECK(mxrun::NegotiateExposition(
            "application/openmetrics-text;version=1.0.0,application/openmetrics-text;"
            "version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1") ==
        ExpositionFormat::kOpenMetrics);
  CHECK(mxrun::NegotiateExposition("text/plain;version=0.0.4;q=1,application/openmetrics-text;"
                                   "q=0.5") == ExpositionFormat::kPrometheusText);
  CHECK(mxrun::NegotiateExposition("") == ExpositionFormat::kPrometheusText);
  CHECK(mxrun::NegotiateExposition("*/*") == ExpositionFormat::kPrometheusText);
  CHECK(std::string(mxrun::ExpositionContentType(ExpositionFormat::kOpenMetrics))
            .rfind("application/openmetrics-text; version=1.0.0", 0) == 0);
}

TEST_CASE("HTTP request heads: GET and HEAD parsed, everything else refused with its status",
          "[metrics]") {
  auto ok = mxrun::ParseHttpRequestHead(
      "GET /metrics?x=1 HTTP/1.1\r\nHost: a\r\nAccept:  text/plain \r\n\r\n");
  REQUIRE(std::holds_alternative<mxrun::HttpRequest>(ok));
  const auto& request = std::get<mxrun::HttpRequest>(ok);
  CHECK(request.method == "GET");
  CHECK(request.path == "/metrics");
  CHECK(request.query == "x=1");
  CHECK(request.headers.at("accept") == "text/plain");
  auto status = [](std::string_view head) {
    auto parsed = mxrun::ParseHttpRequestHead(head);
    return std::holds_alternative<mxrun::HttpParseError>(parsed)
               ? std::get<mxrun::HttpParseError>(parsed).status
               : 200;
  };
  CHECK(status("HEAD / HTTP/1.0\r\n\r\n") == 200);
  CHECK(status("POST / HTTP/1.1\r\n\r\n") == 405);
  CHECK(status("GET / HTTP/2\r\n\r\n") == 505);
  CHECK(status("GET http://x/ HTTP/1.1\r\n\r\n") == 400);
  CHECK(status("GET / HTTP/1.1\r\nno colon here\r\n\r\n") == 400);
  CHECK(status("GET /  HTTP/1.1\r\n\r\n") == 400);
  CHECK(status("") == 400);
}

TEST_CASE("HTTP responses: length, type, no caching, and HEAD without the body", "[metrics]") {
  mxrun::HttpResponse response{404, "text/plain; charset=utf-8", "no such page\n"};
  CHECK(mxrun::FormatHttpResponse(response, false) ==
        "HTTP/1.1 404 Not Found\r\nContent-Type: text/plain; charset=utf-8\r\n"
        "Content-Length: 13\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n"
        "no such page\n");
  CHECK(mxrun::FormatHttpResponse(response, true).find("no such page") == std::string::npos);
}
