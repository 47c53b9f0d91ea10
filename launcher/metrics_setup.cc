#include "launcher/metrics_setup.h"

#include <utility>

#include "agent/store/store_metrics.h"
#include "spdlog/spdlog.h"

namespace mxrun {

absl::StatusOr<AgentMetricsEndpoint> StartAgentMetrics(const LaunchOptions& options,
                                                       const std::string& run_id,
                                                       const NodeRendezvous& node,
                                                       MetricsServing serving,
                                                       AgentConfig& config) {
  AgentMetricsEndpoint endpoint;
  if (options.metrics.port < 0) return endpoint;
  endpoint.metrics = std::make_unique<AgentMetrics>(run_id);
  HttpServer::Options http;
  http.host = options.local_addr.empty() ? "127.0.0.1" : options.local_addr;
  http.bind_all = options.metrics.bind_all;
  http.port = options.metrics.port;
  http.who = "mxrun metrics";
  http.tls = std::move(serving.tls);
  AgentMetrics* observed = endpoint.metrics.get();
  MetricsRenderer render = [observed](ExpositionFormat format) {
    return observed->Render(format, AgentObserver::Time::clock::now());
  };
  if (node.store_totals) render = StoreMetrics(node.store_totals, std::move(render));
  if (serving.wrap) render = serving.wrap(std::move(render));
  absl::StatusOr<std::unique_ptr<HttpServer>> server =
      StartMetricsEndpoint(http, std::move(render), std::move(serving.pages));
  if (!server.ok()) return server.status();
  endpoint.server = std::move(*server);
  spdlog::info("serving Prometheus metrics at {}/metrics", endpoint.server->url());
  config.observers.push_back(endpoint.metrics.get());
  return endpoint;
}

}  // namespace mxrun
