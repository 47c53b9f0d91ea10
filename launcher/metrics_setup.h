#pragma once
// The agent's Prometheus endpoint as --metrics_port asks: the agent's own metrics
// (agent/metrics/agent_metrics.h) and, where this agent hosts the workers' store, the store's
// (agent/store/store_metrics.h), over plain HTTP. What only mxrun-multinode can add (HTTPS for
// --metrics_tls, the master's metrics and status page on an agent that hosts its job's master)
// comes in as a MetricsServing from launcher/network/metrics_setup_network.h, so that this file
// builds into both binaries without a branch.

#include <functional>
#include <map>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "agent/elastic_agent.h"
#include "agent/metrics/agent_metrics.h"
#include "common/http/http_server.h"
#include "common/http/metrics_endpoint.h"
#include "launcher/launch_flags/launch_options.h"
#include "launcher/rendezvous_setup.h"

namespace mxrun {

// What the networked build serves beside the agent's metrics.
struct MetricsServing {
  std::shared_ptr<TlsAcceptor> tls;                      // --metrics_tls; null: plain HTTP
  std::function<MetricsRenderer(MetricsRenderer)> wrap;  // puts the master's metrics in front
  std::map<std::string, HttpServer::Handler> pages;      // the master's status page
};

// The endpoint and the metrics it renders; the agent reports to `metrics` (an observer). Keep it
// until the agent has ended: the server, declared last, goes first.
struct AgentMetricsEndpoint {
  std::unique_ptr<AgentMetrics> metrics;
  std::unique_ptr<HttpServer> server;
};

// Starts the endpoint and adds the metrics to `config.observers`; an empty endpoint when
// --metrics_port is off (-1). An error (the port taken, say) is a usage error.
absl::StatusOr<AgentMetricsEndpoint> StartAgentMetrics(const LaunchOptions& options,
                                                       const std::string& run_id,
                                                       const NodeRendezvous& node,
                                                       MetricsServing serving, AgentConfig& config);

}  // namespace mxrun
