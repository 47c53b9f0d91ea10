#include "rendezvous/master_server/master_endpoint.h"

#include <chrono>

#include "rendezvous/master_server/master_metrics.h"
#include "rendezvous/master_server/status_page.h"

namespace mxrun {

std::map<std::string, HttpServer::Handler> MasterPages(ServedRuns runs,
                                                       std::function<std::string()> leader) {
  std::map<std::string, HttpServer::Handler> pages;
  pages["/"] = [runs = std::move(runs), leader = std::move(leader)](const HttpRequest&) {
    const std::optional<std::vector<RunSnapshot>> served = runs();
    return HttpResponse{200, "text/html; charset=utf-8",
                        served ? RenderStatusPage(*served, std::chrono::steady_clock::now())
                               : RenderStandbyPage(leader ? leader() : "")};
  };
  return pages;
}

MetricsRenderer MasterMetrics(ServedRuns runs, MetricsRenderer host) {
  if (!host) {
    return [runs = std::move(runs)](ExpositionFormat format) {
      const std::optional<std::vector<RunSnapshot>> served = runs();
      return RenderMasterMetrics(served.value_or(std::vector<RunSnapshot>{}), format,
                                 served.has_value());
    };
  }
  return [runs = std::move(runs), host = std::move(host)](ExpositionFormat format) {
    std::string page = host(format);
    const std::optional<std::vector<RunSnapshot>> served = runs();
    if (!served) return page;  // an etcd candidate that does not lead now
    if (format == ExpositionFormat::kOpenMetrics) page.resize(page.size() - 6);  // "# EOF\n"
    return page + RenderMasterMetrics(*served, format);
  };
}

}  // namespace mxrun
