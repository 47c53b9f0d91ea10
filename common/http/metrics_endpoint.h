#pragma once
// The HTTP endpoint an agent or mxrun-master serves its metrics on: /metrics in the format the
// scraper asks for (metrics_text.h), other pages as given (the master's status page), a short
// index at / when no page is given for it, and 404 for the rest.

#include <functional>
#include <map>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/http/http_server.h"
#include "common/http/metrics_text.h"

namespace mxrun {

using MetricsRenderer = std::function<std::string(ExpositionFormat)>;

absl::StatusOr<std::unique_ptr<HttpServer>> StartMetricsEndpoint(
    const HttpServer::Options& options, MetricsRenderer render,
    std::map<std::string, HttpServer::Handler> pages = {});

}  // namespace mxrun
