#include "common/http/metrics_endpoint.h"

#include <utility>

namespace mxrun {

absl::StatusOr<std::unique_ptr<HttpServer>> StartMetricsEndpoint(
    const HttpServer::Options& options, MetricsRenderer render,
    std::map<std::string, HttpServer::Handler> pages) {
  const std::string who = options.who;
  return HttpServer::Start(
      options,
      [render = std::move(render), pages = std::move(pages),
       who](const HttpRequest& request) -> HttpResponse {
        if (request.path == "/metrics") {
          auto accept = request.headers.find("accept");
          const ExpositionFormat format =
              NegotiateExposition(accept == request.headers.end() ? "" : accept->second);
          return {200, ExpositionContentType(format), render(format)};
        }
        if (auto page = pages.find(request.path); page != pages.end()) {
          return page->second(request);
        }
        if (request.path == "/") {
          return {200, "text/plain; charset=utf-8", who + ": Prometheus metrics at /metrics\n"};
        }
        return {404, "text/plain; charset=utf-8",
                "no page at " + request.path + "; served: /metrics\n"};
      });
}

}  // namespace mxrun
