#include "launcher/network/metrics_setup_network.h"

#include <memory>
#include <optional>
#include <utility>

#include "common/http/tls/http_tls.h"
#include "rendezvous/master_server/master_endpoint.h"
#include "rendezvous/master_server/master_server.h"

namespace mxrun {

absl::StatusOr<MetricsServing> NetworkMetricsServing(const LaunchOptions& options,
                                                     const RendezvousSettings& settings,
                                                     const NodeRendezvous& node) {
  MetricsServing serving;
  if (options.metrics.port < 0) return serving;
  if (options.metrics.tls) {
    if (!settings.tls.enabled()) {
      return absl::InvalidArgumentError(
          "--metrics_tls serves the metrics with the job's certificates, and this job has none: "
          "give --rdzv_conf cert=,key=,cacert= or drop --metrics_tls");
    }
    absl::StatusOr<std::shared_ptr<TlsAcceptor>> tls =
        MakeTlsAcceptor(settings.tls, "--metrics_tls");
    if (!tls.ok()) return tls.status();
    serving.tls = std::move(*tls);
  }
  ServedRuns served = node.elected_runs;
  if (std::shared_ptr<MasterServer> master = node.master) {
    served = [master] { return std::optional(master->Snapshot()); };
  }
  if (served) {
    serving.wrap = [served](MetricsRenderer host) {
      return MasterMetrics(served, std::move(host));
    };
    serving.pages = MasterPages(served, node.elected_master);
  }
  return serving;
}

}  // namespace mxrun
